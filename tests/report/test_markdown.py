"""The report's Markdown (``report/markdown.py``): changes marked by the metric's direction,
where a resumed run trained, and the Table 5 protocols."""

from __future__ import annotations

from highway_transformer.report.markdown import DOWN, _fmt_change


def test_an_improvement_is_marked_by_the_metrics_direction() -> None:
    """⇓ marks a fall of a loss-like metric and a rise of accuracy, never the reverse."""
    assert _fmt_change(-1.5) == f"-1.50% {DOWN}" and _fmt_change(+1.5) == "+1.50%"
    assert _fmt_change(+0.63, higher_better=True) == f"+0.63% {DOWN}"
    assert _fmt_change(-0.12, higher_better=True) == "-0.12%"


def test_stretch_summary_names_where_a_resumed_run_trained() -> None:
    from highway_transformer.report.markdown import stretch_summary

    machine = {"device": "cpu", "cpu_capability": "AVX2", "threads": 1, "torch": "2.13.0"}
    assert stretch_summary(None) == "—"
    assert stretch_summary([{"from_step": 0, "to_step": 9, **machine}]) == "1"
    resumed = [
        {"from_step": 0, "to_step": 400, "seconds": 60.0, "recorded": False},
        {"from_step": 400, "to_step": 900, "seconds": 70.0, **machine},
    ]
    assert stretch_summary(resumed) == (
        "2 (0–400: not recorded; 400–900: cpu AVX2, 1 thread, torch 2.13.0)"
    )


def test_report_labels_the_table5_protocols() -> None:
    from highway_transformer.experiments import get_experiment
    from highway_transformer.report.markdown import protocols_markdown

    rows = [{"protocols": get_experiment("ht-table5/l6-xl").protocols}]
    text = "\n".join(protocols_markdown(rows))
    assert "*paper eval bpc*: validation during training (segment 128, memory 896" in text
    assert "*paper test bpc*: test protocol (segment 80, memory 2100" in text
    assert protocols_markdown([{"protocols": {}}]) == []
