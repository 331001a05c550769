"""``python -m highway_transformer.hf.lm_eval ARGS``: lm-eval's own command line, run in a
process where importing this package registered our classes with the Auto classes, so ``--model hf
--model_args pretrained=DIR`` loads a folder written by ``highway export`` (the plain
``lm_eval`` command never imports this package). Every argument is lm-eval's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..extras import import_extra


def main(argv: Sequence[str] | None = None) -> None:
    """Run lm-eval's command line on ``argv`` (default: this process's arguments)."""
    import_extra("lm_eval", "python -m highway_transformer.hf.lm_eval")
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *(sys.argv[1:] if argv is None else argv)]
    cli_evaluate()


if __name__ == "__main__":
    main()
