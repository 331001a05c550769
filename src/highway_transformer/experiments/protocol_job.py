"""``python -m highway_transformer.experiments.protocol_job RUN_DIR ROW SCALE DEVICE``: the
process ``highway run --jobs N`` starts to measure a finished HT Table 5 row the paper's way
(a module of its own, which the package never imports, so ``-m`` runs it cleanly)."""

from __future__ import annotations

import sys

from .protocols import measure_protocol
from .registry import get_experiment


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        raise SystemExit(
            "usage: python -m highway_transformer.experiments.protocol_job RUN_DIR ROW SCALE "
            "DEVICE (started by `highway run --jobs N`)"
        )
    run_dir, row, scale, device = argv
    measure_protocol(run_dir, get_experiment(row), scale, device)


if __name__ == "__main__":
    main(sys.argv[1:])
