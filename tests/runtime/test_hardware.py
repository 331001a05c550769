"""CPU capability detection: reduced precision is checked, never assumed."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.runtime import hardware


@pytest.fixture
def flags(monkeypatch):
    """Pretend the CPU has the given /proc/cpuinfo flags."""

    def set_flags(*names: str) -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(names))

    return set_flags


def test_avx2_only_cpu_refuses_bf16_and_names_the_fix(flags) -> None:
    flags("sse4_2", "avx2", "fma")
    assert not hardware.cpu_native("bf16")
    with pytest.raises(ConfigError, match="train.precision=fp32") as info:
        hardware.check_precision(torch.device("cpu"), "bf16")
    assert "\n" not in str(info.value) and "avx512_bf16" in str(info.value)


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_native_bf16_cpu_accepts_bf16(flags, flag) -> None:
    flags("avx2", flag)
    assert hardware.cpu_native("bf16")
    hardware.check_precision(torch.device("cpu"), "bf16")


def test_fp16_needs_its_own_flags(flags) -> None:
    flags("avx2", "avx512_bf16")
    assert not hardware.cpu_native("fp16")
    with pytest.raises(ConfigError):
        hardware.check_precision(torch.device("cpu"), "fp16")
    flags("amx_fp16")
    hardware.check_precision(torch.device("cpu"), "fp16")


def test_fp32_and_non_cpu_devices_are_never_refused(flags) -> None:
    flags("avx2")
    hardware.check_precision(torch.device("cpu"), "fp32")
    hardware.check_precision(torch.device("meta"), "bf16")


def test_describe_names_capability_threads_and_torch() -> None:
    info = hardware.describe("cpu")
    assert info["threads"] == torch.get_num_threads() and info["torch"] == torch.__version__
    assert isinstance(info["cpu_bf16_native"], bool)
    assert "cpu_capability" in hardware.describe_line()


def test_cli_bf16_on_an_avx2_only_cpu_is_one_line_and_writes_nothing(
    flags, tmp_path, capsys
) -> None:
    from highway_transformer import cli

    flags("sse4_2", "avx2", "fma")
    out = tmp_path / "run"
    argv = ["train", "--task", "adding", "train.precision=bf16", "train.max_steps=1"]
    assert cli.main([*argv, "--out", str(out), "--no-progress"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "avx512_bf16" in lines[0] and "train.precision=fp32" in lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_cpu_contention_warns_only_when_threads_would_outnumber_the_free_cores() -> None:
    assert hardware.cpu_contention(2, load=0.1, cores=2) == ""  # an idle machine
    assert hardware.cpu_contention(1, load=1.0, cores=2) == ""  # one core free, one thread
    assert hardware.cpu_contention(1, load=1.4, cores=2) == ""  # within half a core
    busy = hardware.cpu_contention(1, load=2.0, cores=2)
    assert busy.startswith("warning: the CPU is busy (load average 2.0 on 2 cores)")
    assert "OMP_NUM_THREADS" in busy and "\n" not in busy
    assert hardware.cpu_contention(2, load=1.0, cores=2) != ""  # two threads, one core free
