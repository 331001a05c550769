"""Texts too long to hold: read a piece at a time, token ids kept compact and read back a range
at a time.

:func:`text_pieces` decodes a file's UTF-8 in pieces cut where a tokeniser cannot tell the
difference (the ``cut_*`` functions: after a line feed for the PTB line formats, after white
space for words, between a printable ASCII character and a space or line feed for a byte-level
BPE/unigram tokenizer), so the pieces' tokens, joined, are the whole text's.
:class:`TokenFile` holds the ids (``uint16``/``uint32``) in memory up to a size and in an
anonymous temporary file beyond it; evaluation reads it a window at a time
(:class:`~highway_transformer.data.batching.TokenReader`).
"""

from __future__ import annotations

import codecs
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError

READ_BYTES = 1 << 20  # bytes read from the file at a time
SPILL_BYTES = 1 << 22  # ids held in memory before they move to a temporary file


def read_chunks(path: str | Path, size: int | None = None) -> Iterator[bytes]:
    """The bytes of ``path``, ``size`` (default :data:`READ_BYTES`) at a time."""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(size or READ_BYTES):
                yield chunk
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}; give a text file") from None


def cut_anywhere(text: str) -> int:
    """Characters: any cut keeps the symbols."""
    return len(text)


def cut_after_line(text: str) -> int:
    """After the last line feed (``str.splitlines`` never joins ``\\n`` to what follows)."""
    return text.rfind("\n") + 1


def cut_after_space(text: str) -> int:
    """After the last space or line feed (``str.split`` words)."""
    return max(text.rfind("\n"), text.rfind(" ")) + 1


_SUBWORD_CUT = re.compile(r"[!-~][ \n]")


def cut_before_space(text: str) -> int:
    """Before the last space or line feed that follows a printable ASCII character.

    A byte-level tokenizer splits text with the GPT-2 pattern first and never merges across
    its pieces; no piece runs from such a character into white space, and what follows the
    cut is matched the same whether the text before it is there or not.
    """
    for start in (max(len(text) - (1 << 16), 0), 0):  # the end first: one scan, as a rule
        found = [m.start() for m in _SUBWORD_CUT.finditer(text, start)]
        if found:
            return found[-1] + 1
        if start == 0:
            break
    return 0


def text_pieces(chunks: Iterator[bytes], cut: Callable[[str], int]) -> Iterator[str]:
    """The UTF-8 text of ``chunks`` in pieces ending where ``cut`` (the position of the last
    safe cut in a text, 0 for none) allows; a text with no cut comes as one piece."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    held: list[str] = []  # text since the last cut
    try:
        for chunk in chunks:
            new = decoder.decode(chunk)
            if not new:
                continue
            before = held[-1][-1] if held else ""  # a cut may fall between the two
            end = cut(before + new) - len(before)  # -1 or less: no cut; 0: before ``new``
            if end < 0 or not (end or held):
                held.append(new)
                continue
            yield "".join(held) + new[:end]
            held = [new[end:]] if end < len(new) else []
        held.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise DataError("the file is not UTF-8 text; this model reads text, not bytes") from None
    if rest := "".join(held):
        yield rest


class TokenFile:
    """Token ids appended a piece at a time, read back a range at a time: in memory up to
    ``spill_bytes``, then in an anonymous temporary file (deleted when closed; pages the
    operating system caches for it are not this process's memory)."""

    def __init__(self, dtype: np.dtype, spill_bytes: int = SPILL_BYTES) -> None:
        self.dtype = np.dtype(dtype)
        self.spill_bytes = spill_bytes
        self.parts: list[np.ndarray] = []
        self.array: np.ndarray | None = None  # the ids, once finished in memory
        self.file: IO[bytes] | None = None
        self.length = 0

    def append(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=self.dtype)
        if self.file is None and (self.length + ids.size) * self.dtype.itemsize > self.spill_bytes:
            self.file = tempfile.TemporaryFile(prefix="highway-ids-")  # noqa: SIM115 (closed by close)
            for part in self.parts:
                self.file.write(part.data)
            self.parts = []
        if self.file is not None:
            self.file.write(ids.data)
        else:
            self.parts.append(ids)
        self.length += ids.size

    def finish(self) -> TokenFile:
        """Ready to read (no more appends)."""
        if self.file is None:
            self.array = np.concatenate(self.parts) if self.parts else np.zeros(0, self.dtype)
            self.parts = []
        else:
            self.file.flush()
        return self

    @property
    def on_disk(self) -> bool:
        return self.file is not None

    def __len__(self) -> int:
        return self.length

    def read(self, start: int, stop: int) -> Tensor:
        """``ids[start:stop]`` as ``int64``."""
        stop = min(stop, self.length)
        if self.array is not None:
            ids = self.array[start:stop]
        else:
            assert self.file is not None, "finish() before reading"
            self.file.seek(start * self.dtype.itemsize)
            raw = self.file.read(max(stop - start, 0) * self.dtype.itemsize)
            ids = np.frombuffer(raw, self.dtype)
        return torch.from_numpy(ids.astype(np.int64))

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        self.file, self.array, self.parts = None, None, []

    def __enter__(self) -> TokenFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
