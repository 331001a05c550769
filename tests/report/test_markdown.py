"""The report's Markdown (``report/markdown.py``): changes marked by the metric's direction,
where a resumed run trained, the Table 5 protocols and the lines to beat."""

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


def test_lines_to_beat_show_accuracy_and_loss_and_cope_with_a_missing_one() -> None:
    """Beside an accuracy the loss is shown; 1-NN has none, and its cells say so (—)."""
    from highway_transformer.report.markdown import baselines_markdown

    models = {
        "class prior": {s: {"loss": 2.309, "accuracy": 0.0704} for s in ("valid", "test")},
        "1-nearest neighbour": {"valid": {"accuracy": 0.98889}, "test": {"accuracy": 0.97}},
        "logistic regression": {"valid": {"loss": 0.1614, "accuracy": 0.9667}},  # no test
    }
    lines = baselines_markdown({"models": models}, "accuracy")
    assert "| trivial model | eval accuracy | test accuracy | eval loss | test loss |" in lines
    assert "| class prior | 7.04 | 7.04 | 2.3090 | 2.3090 |" in lines
    assert "| 1-nearest neighbour | 98.89 | 97.00 | — | — |" in lines
    assert "| logistic regression | 96.67 | — | 0.1614 | — |" in lines
    assert any("1-NN gives no probabilities" in line for line in lines)
    trigram = {"trigram": {"valid": {"loss": 1.8, "bpc": 2.6641}, "test": {"bpc": 2.629}}}
    lines = baselines_markdown({"models": trigram}, "bpc")  # a loss-like metric: one column
    assert "| trivial model | eval bpc | test bpc |" in lines
    assert "| trigram | 2.6641 | 2.6290 |" in lines
