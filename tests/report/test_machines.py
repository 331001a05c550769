"""Machines (``report/machines.py``): what decides a run's speed, and which runs trained on which
kind of machine."""

from __future__ import annotations


def test_machines_keep_what_decides_speed_and_name_what_differs() -> None:
    from highway_transformer.report.machines import machine_of, run_machines, runs_by_machine

    a = {"device": "cpu", "cpu_capability": "AVX2", "threads": 1, "host": "a", "seconds": 3.0}
    assert machine_of(a) == machine_of({**a, "host": "b", "seconds": 9.0})
    assert machine_of(a) != machine_of({**a, "threads": 2})
    assert machine_of(a) == (("cpu_capability", "AVX2"), ("device", "cpu"), ("threads", "1"))
    assert machine_of({"from_step": 0, "recorded": False}) == ()
    assert run_machines(None) == {()}
    assert run_machines({"metadata": a}) == {machine_of(a)}  # older runs: metadata
    two = {"stretches": [{**a, "from_step": 0}, {**a, "threads": 2, "from_step": 5}]}
    machines = runs_by_machine([("x", {"metadata": a}), ("y", two), ("z", None)])
    assert machines == {
        "time_comparable": False,
        "common": "",  # 'not recorded' shares nothing with the others
        "runs_by_machine": {"not recorded": ["z"],
                            "cpu_capability AVX2, device cpu, threads 1": ["x", "y"],
                            "cpu_capability AVX2, device cpu, threads 2": ["y"]},
    }  # fmt: skip
    machines = runs_by_machine([("x", {"metadata": a}), ("y", two)])
    assert machines["common"] == "cpu_capability AVX2, device cpu"
    assert machines["runs_by_machine"] == {"threads 1": ["x", "y"], "threads 2": ["y"]}
    assert runs_by_machine([("x", None), ("y", {})])["time_comparable"] is True
    # a stretch recorded before cpu_model was is the same kind as one that records it
    newer = {"metadata": {**a, "cpu_model": "AMD EPYC"}}
    machines = runs_by_machine([("x", {"metadata": a}), ("y", newer)])
    assert machines["time_comparable"] is True
    assert machines["runs_by_machine"] == {
        "cpu_capability AVX2, cpu_model AMD EPYC, device cpu, threads 1": ["y", "x"]
    }
    other = {"metadata": {**a, "cpu_capability": "AVX512", "cpu_model": "AMD EPYC"}}
    assert runs_by_machine([("x", {"metadata": a}), ("z", other)])["time_comparable"] is False
