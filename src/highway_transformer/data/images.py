"""Pixel-by-pixel image classification: sequential and permuted MNIST, and a small stand-in.

Each image is read one pixel a step (a sequence of ``H * W`` steps with one feature), as in
the sequential MNIST task of Le et al. (2015) used by the TCN suite (Bai et al. 2018) and
the R-Transformer paper (Wang et al. 2019, Table 1). Permuted MNIST applies one fixed random
permutation to the pixel order of every image.

MNIST comes in the IDX format (LeCun et al., http://yann.lecun.com/exdb/mnist/): a magic
number of two zero bytes, a type code (0x08 unsigned byte, 0x09 signed byte, 0x0B short,
0x0C int, 0x0D float, 0x0E double) and the number of dimensions, then one big-endian int32
size per dimension, then the data in big-endian C order. :func:`read_idx` and
:func:`write_idx` handle it, gzip-compressed (``.gz``) or not. :func:`load_mnist` reads each
MNIST file raw or gzip-compressed and checks it by the SHA-256 of its *uncompressed* content
(:data:`MNIST`), so a re-compressed copy is accepted and a truncated or altered one is not.

Without a download, :func:`load_digits_default` offers scikit-learn's 8x8 digits (64 steps)
with a fixed train/valid/test split: a quick, offline stand-in for the same task.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError
from ..extras import import_extra
from .download import cache_dir, fetch

# type code -> big-endian numpy dtype
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def _open_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip (by suffix or by its magic bytes)."""
    if not path.is_file():
        raise DataError(f"IDX file {path} not found; check the path or download the data")
    raw = path.read_bytes()
    if path.suffix == ".gz" or raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path} is not a valid gzip file ({exc}); re-download it") from exc
    return raw


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed) into a native-endian numpy array."""
    path = Path(path)
    return parse_idx(_open_bytes(path), path)


def parse_idx(data: bytes, where: str | Path = "IDX data") -> np.ndarray:
    """The array held by the (uncompressed) IDX bytes ``data``; ``where`` names them in errors."""
    if len(data) < 4:
        raise DataError(f"{where} is truncated: {len(data)} bytes, shorter than an IDX header")
    zero0, zero1, code, ndim = data[0], data[1], data[2], data[3]
    if zero0 != 0 or zero1 != 0 or code not in IDX_TYPES:
        raise DataError(
            f"{where} has magic number 0x{data[:4].hex()}, not an IDX file (expected "
            "0x0000 followed by a type code 08/09/0B/0C/0D/0E); check the file"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{where} is truncated inside its header; re-download it")
    shape = struct.unpack(f">{ndim}i", data[4:header])
    if any(size < 0 for size in shape):
        raise DataError(f"{where} declares a negative dimension {shape}; the file is corrupt")
    dtype = IDX_TYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(data) - header
    if got < expected:
        raise DataError(
            f"{where} is truncated: shape {shape} needs {expected} data bytes, found {got}; "
            "re-download it"
        )
    if got > expected:
        raise DataError(
            f"{where} has {got - expected} bytes after the {shape} array; the file is corrupt"
        )
    array = np.frombuffer(data, dtype=dtype, count=expected // dtype.itemsize, offset=header)
    return array.reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path: str | Path, array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file; a ``.gz`` suffix writes it gzip-compressed."""
    path = Path(path)
    array = np.asarray(array)
    code = next(
        (
            c
            for c, dt in IDX_TYPES.items()
            if dt.kind == array.dtype.kind and dt.itemsize == array.dtype.itemsize
        ),
        None,
    )
    if code is None:
        raise DataError(
            f"IDX cannot store dtype {array.dtype}; convert to uint8, int8, int16, int32, "
            "float32 or float64"
        )
    if not 1 <= array.ndim <= 255:
        raise DataError(f"IDX stores arrays of 1 to 255 dimensions, got {array.ndim}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=IDX_TYPES[code]).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)
    return path


@dataclass(frozen=True)
class MnistFile:
    """One MNIST file: its distributed name, download mirrors (tried in order), the SHA-256
    and size of the distributed gzip archive (checked on download) and those of its
    uncompressed IDX content (checked on every load, whichever way the file is stored)."""

    filename: str
    urls: tuple[str, ...]
    sha256: str
    size: int
    content_sha256: str
    content_size: int

    @property
    def name(self) -> str:
        """The uncompressed file's name (``train-images-idx3-ubyte``)."""
        return self.filename.removesuffix(".gz")


def _mirrors(name: str) -> tuple[str, ...]:
    return (
        f"https://ossci-datasets.s3.amazonaws.com/mnist/{name}",
        f"https://storage.googleapis.com/cvdf-datasets/mnist/{name}",
        f"https://yann.lecun.com/exdb/mnist/{name}",
    )


# SHA-256 of the gzip files as distributed by LeCun et al. and mirrored by PyTorch (ossci)
# and Google (cvdf); the same values appear in many independent download scripts. The content
# hashes are of the uncompressed IDX files, which any re-compression (gzip -9, another mtime)
# leaves unchanged: they identify MNIST however a copy is stored.
MNIST: dict[str, MnistFile] = {
    "train-images": MnistFile(
        "train-images-idx3-ubyte.gz",
        _mirrors("train-images-idx3-ubyte.gz"),
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        9_912_422,
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        47_040_016,
    ),
    "train-labels": MnistFile(
        "train-labels-idx1-ubyte.gz",
        _mirrors("train-labels-idx1-ubyte.gz"),
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        28_881,
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        60_008,
    ),
    "test-images": MnistFile(
        "t10k-images-idx3-ubyte.gz",
        _mirrors("t10k-images-idx3-ubyte.gz"),
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        1_648_877,
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        7_840_016,
    ),
    "test-labels": MnistFile(
        "t10k-labels-idx1-ubyte.gz",
        _mirrors("t10k-labels-idx1-ubyte.gz"),
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        4_542,
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        10_008,
    ),
}

Split = tuple[Tensor, Tensor]


@dataclass
class ImageSplits:
    """Train/valid/test pairs ``(pixels float32 [N, T, 1] in [0, 1], labels int64 [N])``.

    ``permutation`` is the pixel order applied to every split (None: raster order).
    """

    train: Split
    valid: Split
    test: Split
    n_classes: int = 10
    image_shape: tuple[int, int] = (28, 28)
    permutation: Tensor | None = None

    @property
    def seq_len(self) -> int:
        """Steps per sequence (pixels per image)."""
        return int(self.train[0].shape[1])


def pixel_permutation(length: int, seed: int) -> Tensor:
    """The fixed random pixel order of permuted MNIST for sequences of ``length`` steps."""
    return torch.randperm(length, generator=torch.Generator().manual_seed(seed))


def _finish(
    splits: dict[str, Split],
    image_shape: tuple[int, int],
    permute: bool,
    seed: int,
) -> ImageSplits:
    perm = pixel_permutation(image_shape[0] * image_shape[1], seed) if permute else None
    if perm is not None:
        splits = {k: (x[:, perm], y) for k, (x, y) in splits.items()}
    return ImageSplits(
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        image_shape=image_shape,
        permutation=perm,
    )


def _locate(root: Path, entry: MnistFile) -> Path | None:
    for name in (entry.filename, entry.filename.removesuffix(".gz")):
        for folder in (root, root / "mnist", root / "MNIST" / "raw"):
            if (folder / name).is_file():
                return folder / name
    return None


def _download(root: Path, entry: MnistFile) -> Path:
    errors = []
    for url in entry.urls:
        try:
            return fetch(url, entry.sha256, root / entry.filename)
        except DataError as exc:
            errors.append(str(exc))
    raise DataError(f"could not download {entry.filename} from any mirror: {errors[-1]}")


def read_mnist_file(path: Path, entry: MnistFile) -> np.ndarray:
    """The IDX array of one MNIST file stored raw or gzip-compressed, after checking that its
    uncompressed content is MNIST's (size, then SHA-256: 47 MB hash in a fraction of a second)."""
    data = _open_bytes(path)
    fix = f"replace it with a good copy of {entry.name} (raw or .gz) or delete it and download"
    if len(data) != entry.content_size:
        raise DataError(
            f"{path} holds {len(data):,} bytes of IDX data, MNIST's {entry.name} has "
            f"{entry.content_size:,}: the file is truncated or not MNIST's; {fix}"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.content_sha256:
        raise DataError(
            f"{path}: SHA-256 of its content is {digest[:16]}…, MNIST's {entry.name} has "
            f"{entry.content_sha256[:16]}…: the file is corrupt or another data set; {fix}"
        )
    return parse_idx(data, path)


def _pixels(images: np.ndarray, where: str) -> Tensor:
    """``[N, rows, cols]`` uint8 images as float32 ``[N, rows * cols, 1]`` in [0, 1]."""
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DataError(
            f"{where} holds {images.dtype} of shape {images.shape}; expected uint8 "
            "[N, rows, cols] images (an MNIST images file)"
        )
    n, rows, cols = images.shape
    pixels = images.reshape(n, rows * cols, 1).astype(np.float32)
    pixels /= 255.0  # in place: one float copy of the 47 M training pixels
    return torch.from_numpy(pixels)


def load_mnist(
    data_dir: str | Path | None = None,
    download: bool = False,
    permute: bool = False,
    seed: int = 0,
    valid_size: int = 5000,
) -> ImageSplits:
    """Sequential (or, with ``permute``, permuted) MNIST: 784 steps of one pixel in [0, 1].

    Files are looked up (``.gz`` or uncompressed) in ``data_dir`` (default: the per-user
    cache), ``data_dir/mnist`` or ``data_dir/MNIST/raw`` (torchvision's layout), and the
    missing ones downloaded into ``data_dir`` when ``download`` is true (each archive checked
    by its SHA-256). Every file is checked by the SHA-256 of its uncompressed content
    (:func:`read_mnist_file`); a truncated or altered one is a :class:`DataError`. The last
    ``valid_size`` training images form the validation split (55,000/5,000/10,000 by
    default); ``seed`` picks the pMNIST pixel permutation.
    """
    root = Path(data_dir).expanduser() if data_dir is not None else cache_dir() / "mnist"
    paths: dict[str, Path] = {}
    missing = []
    for key, entry in MNIST.items():
        found = _locate(root, entry)
        if found is None and download:
            found = _download(root, entry)
        if found is None:
            missing.append(entry.filename)
        else:
            paths[key] = found
    if missing:
        raise DataError(
            f"MNIST files missing in {root}: {', '.join(missing)}; put them there (raw or "
            ".gz) or pass download=True"
        )
    arrays = {key: read_mnist_file(path, MNIST[key]) for key, path in paths.items()}
    for part in ("train", "test"):
        images, labels = arrays[f"{part}-images"], arrays[f"{part}-labels"]
        if labels.ndim != 1 or len(labels) != len(images):
            raise DataError(
                f"MNIST {part} has {len(images)} images but labels of shape {labels.shape}; "
                "the files do not belong together"
            )
    train_x = _pixels(arrays["train-images"], paths["train-images"].name)
    train_y = torch.from_numpy(arrays["train-labels"].astype(np.int64))
    test_x = _pixels(arrays["test-images"], paths["test-images"].name)
    test_y = torch.from_numpy(arrays["test-labels"].astype(np.int64))
    if not 0 <= valid_size < len(train_x):
        raise DataError(
            f"valid_size {valid_size} must be between 0 and {len(train_x) - 1} "
            "(the number of training images minus one)"
        )
    cut = len(train_x) - valid_size
    splits = {
        "train": (train_x[:cut], train_y[:cut]),
        "valid": (train_x[cut:], train_y[cut:]),
        "test": (test_x, test_y),
    }
    rows, cols = arrays["train-images"].shape[1:]
    return _finish(splits, (int(rows), int(cols)), permute, seed)


DIGITS_SPLIT = (1257, 270, 270)  # train/valid/test sizes of the 1,797 scikit-learn digits


def load_digits_default(permute: bool = False, seed: int = 0, split_seed: int = 0) -> ImageSplits:
    """scikit-learn's 8x8 digits as 64-step pixel sequences (values 0..16 scaled to [0, 1]).

    A fixed split (``split_seed``) gives 1,257/270/270 images; ``permute`` and ``seed``
    apply one pixel permutation to all splits as for pMNIST. Needs no download.
    """
    datasets = import_extra("sklearn.datasets", "the digits data (task.dataset=digits)")
    digits = datasets.load_digits()
    images = np.asarray(digits.images, dtype=np.float32) / 16.0
    labels = np.asarray(digits.target, dtype=np.int64)
    order = np.random.RandomState(split_seed).permutation(len(images))
    n_train, n_valid, _ = DIGITS_SPLIT
    pixels = torch.from_numpy(images.reshape(len(images), 64, 1))
    targets = torch.from_numpy(labels)
    index = {
        "train": order[:n_train],
        "valid": order[n_train : n_train + n_valid],
        "test": order[n_train + n_valid :],
    }
    splits = {
        k: (pixels[torch.from_numpy(i)], targets[torch.from_numpy(i)]) for k, i in index.items()
    }
    return _finish(splits, (8, 8), permute, seed)
