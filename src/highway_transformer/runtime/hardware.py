"""What the machine can do fast: CPU instruction sets for reduced precision, device facts.

CPUs differ: with AMX or AVX512-BF16, bf16 is native, and bf16 autocast is faster than fp32
where the matrix products dominate (T-L3 at d 512 on an AVX512-BF16 CPU without AMX: 1.6x;
at d 128 no faster, 1.0x); on an AVX2-only CPU torch emulates bf16 and a training step runs
5-16x *slower* than fp32 (measured on the XL model and the LocalRNN). So reduced precision on
a CPU is checked here, never assumed, and every benchmark figure is printed with
:func:`describe`.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path

import torch

from ..errors import ConfigError
from .provenance import code_facts

#: /proc/cpuinfo flags that give native (hardware) support of a reduced precision.
NATIVE_FLAGS = {
    "bf16": ("amx_bf16", "avx512_bf16"),
    "fp16": ("amx_fp16", "avx512_fp16"),
}


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where there is no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where the file does not exist)."""
    info = _cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def cpu_model() -> str:
    """The CPU's model name (``AMD EPYC ...``): two CPUs of one instruction set can differ in
    speed, so runs record it beside the capability."""
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or "unknown"


def cpu_native(precision: str) -> bool:
    """Whether this CPU computes ``precision`` (bf16 | fp16) in hardware; fp32 always does.

    Linux: the CPU flags. Elsewhere (no flags to read): Apple silicon has native bf16/fp16;
    for bf16, oneDNN's own check is asked.
    """
    if precision == "fp32":
        return True
    flags = cpu_flags()
    if flags:
        return any(flag in flags for flag in NATIVE_FLAGS[precision])
    if platform.machine() in ("arm64", "aarch64") and platform.system() == "Darwin":
        return True
    if precision == "bf16":
        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(check()) if check is not None else False
    return False


def check_precision(device: torch.device, precision: str) -> None:
    """Refuse reduced precision on a CPU that would emulate it (many times slower than fp32)."""
    if device.type != "cpu" or cpu_native(precision):
        return
    wanted = " or ".join(NATIVE_FLAGS[precision])
    raise ConfigError(
        f"train.precision={precision} on this CPU ({cpu_capability()}, no {wanted}) would be "
        f"emulated and run several times slower than fp32; use train.precision=fp32 (or a GPU)"
    )


def cpu_contention(threads: int, load: float | None = None, cores: int | None = None) -> str:
    """A one-line warning when ``threads`` more CPU threads would share the cores with work
    already running (the 1-minute load average ``load`` on ``cores``; both read here when
    not given), else "". Threads that outnumber the cores make every run several times
    slower (two runs of one thread each beside another on 2 cores: about 10x)."""
    cores = cores or os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform
            return ""
    if load + threads <= cores + 0.5:
        return ""
    return (
        f"warning: the CPU is busy (load average {load:.1f} on {cores} cores) and these runs "
        f"take {threads} thread(s): sharing cores slows every run several-fold; wait for the "
        f"other work, or give the runs only the free cores (OMP_NUM_THREADS=N, or --jobs)"
    )


def cpu_capability() -> str:
    """The vector instruction set torch dispatches to on this CPU (``AVX2``, ``AVX512``...)."""
    getter = getattr(torch.backends.cpu, "get_cpu_capability", None)
    return str(getter()) if getter is not None else platform.machine()


def describe(device: torch.device | str = "cpu") -> dict[str, object]:
    """Facts to print beside every measured figure: device, CPU capability, threads, torch."""
    device = torch.device(device)
    info: dict[str, object] = {
        "device": str(device),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_capability": cpu_capability(),
        "cpu_bf16_native": cpu_native("bf16"),
        "cpu_fp16_native": cpu_native("fp16"),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    if device.type == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(device)
        info["gpu_bf16"] = torch.cuda.is_bf16_supported()
    return info


def describe_line(device: torch.device | str = "cpu") -> str:
    """:func:`describe` as one line, for benchmark output."""
    return ", ".join(f"{key} {value}" for key, value in describe(device).items())


def run_metadata(
    device: torch.device | str, precision: str, compiled: bool = False
) -> dict[str, object]:
    """What a training run records about where it ran and which code ran it
    (``results.json``, each stretch of training): :func:`describe`, the precision, whether
    its step is compiled (``train.compile``), the host name and
    :func:`~.provenance.code_facts`."""
    return {
        **describe(device),
        "precision": precision,
        "compiled": compiled,
        "host": platform.node(),
        **code_facts(),
    }
