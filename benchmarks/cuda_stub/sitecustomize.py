"""The GPU rehearsal's CUDA stub (``benchmarks/gpu_rehearsal.sh``), active only where
``HIGHWAY_CUDA_STUB=1`` and this folder is on ``PYTHONPATH``.

torch then answers that one CUDA device is there, so every step of the GPU check gets past
its interpreter check, imports and argument parsing; the first real CUDA call (torch's lazy
CUDA initialisation, which every allocation, device query and compile on CUDA goes through)
raises :data:`MARK`, which the rehearsal looks for in each step's log.
"""

import os

MARK = "cuda-stub: the first CUDA call was reached"

if os.environ.get("HIGHWAY_CUDA_STUB") == "1":
    import torch

    def _first_cuda_call(*args: object, **kwargs: object) -> None:
        raise RuntimeError(MARK)

    # Only what answers without a device is faked; everything else (allocations, device
    # properties, synchronisation, compiles) goes through the lazy initialisation.
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda._lazy_init = _first_cuda_call
