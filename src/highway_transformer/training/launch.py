"""``highway train --nproc N``: start N local training processes with PyTorch's launcher.

This is ``torchrun --standalone --nproc-per-node N -m highway_transformer.cli train ...``
run in-process, so a failed rank comes back as one line naming it instead of a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import ConfigError
from ..runtime.world import DistributedError
from .stopping import interrupted

#: How long torch's launcher waits for stopped ranks before killing them (its default).
SHUTDOWN_GRACE_S = 30


def without_nproc(argv: Sequence[str]) -> list[str]:
    """``argv`` minus ``--nproc N`` / ``--nproc=N`` (the started processes must not relaunch)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def launch(nproc: int, train_argv: Sequence[str]) -> None:
    """Run ``highway train TRAIN_ARGV`` in ``nproc`` local processes; raise naming a failed rank."""
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    # the launcher's own log lines repeat what the failed rank printed
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    args = get_args_parser().parse_args(
        ["--standalone", f"--nproc-per-node={nproc}", "--module", "highway_transformer.cli"]
        + ["train", *train_argv]
    )
    try:
        run(args)
    except SignalException as exc:  # the launcher passed it on: the ranks checkpoint and stop
        raise interrupted(
            int(exc.sigval),
            f"the {nproc} processes were asked to stop at a checkpoint (within "
            f"{SHUTDOWN_GRACE_S} s, or they were killed and the last checkpoint stands)",
            "continue with --resume",
        ) from None
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        how = (
            f"killed by {failure.signal_name()}"
            if failure.exitcode < 0
            else f"exit status {failure.exitcode}"
        )
        raise DistributedError(
            f"rank {rank} of {nproc} failed ({how}); the other ranks were stopped and the last "
            "checkpoint is intact: fix the cause above and continue with --resume"
        ) from None
