"""A machine (``runtime/machine.py``): the facts of a training stretch that decide its speed,
read back without where or when it ran."""

from __future__ import annotations

from highway_transformer.runtime.machine import PLACE_AND_TIME, machine_of


def test_a_machine_is_the_sorted_speed_facts_as_text() -> None:
    stretch = {"from_step": 0, "to_step": 40, "seconds": 9.5, "host": "a", "device": "cuda",
               "threads": 16, "precision": "bf16", "torch": "2.13.0"}  # fmt: skip
    assert machine_of(stretch) == (
        ("device", "cuda"), ("precision", "bf16"), ("threads", "16"), ("torch", "2.13.0")
    )  # fmt: skip
    elsewhere = {**stretch, "host": "b", "from_step": 40, "to_step": 80, "seconds": 3.0,
                 "started_at": "2026-12-02T01:00:00+00:00"}  # fmt: skip
    assert machine_of(elsewhere) == machine_of(stretch)  # place and time are not the machine
    assert machine_of({**stretch, "threads": 8}) != machine_of(stretch)
    assert {"from_step", "to_step", "seconds", "started_at", "host", "recorded"} == (PLACE_AND_TIME)


def test_a_stretch_recorded_without_its_machine_is_no_machine() -> None:
    assert machine_of({"from_step": 0, "to_step": 9, "recorded": False, "device": "cpu"}) == ()
    assert machine_of({"recorded": True, "device": "cpu"}) == (("device", "cpu"),)
