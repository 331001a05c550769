"""Scales (``experiments/scale.py``): ``small`` is uniform across a table, ``paper`` changes
nothing; the ``cpu``, ``cpu-short``, ``cpu-mnist`` and ``cpu-adamw`` scales: factors, full
splits, optimiser replacement."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from highway_transformer.data.levels import corpus_level
from highway_transformer.errors import ConfigError
from highway_transformer.experiments import (
    describe_scale,
    experiment_config,
    get_experiment,
    scale_config,
    table_experiments,
)
from highway_transformer.experiments.registry import list_experiments
from highway_transformer.experiments.scale import (
    CPU_ADAM_LR_FACTOR,
    CPU_LR_FACTORS,
    CPU_SGD_LR_FACTOR,
    SCALES,
)


def test_cpu_scale_shrinks_char_ptb_t_l3_by_its_factors() -> None:
    c = experiment_config(get_experiment("ht-table1/t-l3"), "cpu")
    assert (c.model.d_model, c.model.d_inner, c.model.n_heads, c.model.n_layers) == (128, 512, 8, 3)
    assert (c.data.seq_len, c.data.context, c.data.batch_size) == (100, 20, 16)
    t = c.train
    assert t.max_steps == 100 * 989 // 5
    assert t.eval_interval == t.max_steps // 50
    assert (t.eval_max_tokens, c.data.max_eval_tokens, c.data.max_train_tokens) == (
        50_000,
        None,
        None,
    )
    # The published SGD with linear decay and clip 0.15, the rate scaled by the pilot's factor.
    assert (t.optimizer, t.schedule, t.clip, t.warmup_steps) == ("sgd", "linear", 0.15, 0)
    assert t.lr == pytest.approx(2.0 * CPU_SGD_LR_FACTOR)


def test_cpu_scale_scales_narrowed_adam_rows_and_keeps_word_ptb_annealing() -> None:
    xl = experiment_config(get_experiment("ht-table5/l6-xl"), "cpu").train
    assert (xl.optimizer, xl.schedule, xl.max_steps) == ("adam", "cosine", 8000)
    assert xl.lr == pytest.approx(2.5e-4 * CPU_ADAM_LR_FACTOR) == pytest.approx(1e-3)
    word = experiment_config(get_experiment("ht-table3/t-l3"), "cpu").train
    assert (word.optimizer, word.schedule) == ("sgd", "anneal")
    assert word.lr == pytest.approx(2.0)  # kept at its published width: the published rate


@pytest.mark.parametrize(
    ("row", "widths"),
    [
        ("ht-table1/t-l3", (128, 512)),  # 512 -> x1/4
        ("ht-table3/t-l3", (128, 512)),  # published at 128: kept (d 32 ended above a bigram)
        ("ht-table4/rt-l3", (128, 512)),
        ("rt-table2/rtransformer", (128, 512)),  # 160 -> no narrower than 128
        ("rt-table1/rtransformer", (32, 128)),  # published narrower than 128: kept
        ("ht-table5/l6-xl", (128, 512)),  # Adam, narrowed x1/4
    ],
)
def test_cpu_scale_narrows_no_model_below_d128(row: str, widths: tuple[int, int]) -> None:
    config = experiment_config(get_experiment(row), "cpu")
    paper = experiment_config(get_experiment(row), "paper")
    assert (config.model.d_model, config.model.d_inner) == widths
    # The pilot's SGD factor is for models narrowed x1/4; the others keep the published rate.
    quartered = config.model.d_model * 4 == paper.model.d_model
    factor = dict(CPU_LR_FACTORS).get(paper.train.optimizer, 1.0) if quartered else 1.0
    assert config.train.lr == pytest.approx(paper.train.lr * factor)
    assert "no narrower than d_model 128" in describe_scale("cpu")


@pytest.mark.parametrize("row", ["ht-table1/t-l3", "ht-table5/l6-xl+sigmoid-l1-3"])
def test_cpu_short_is_cpu_with_a_quarter_of_its_steps(row: str) -> None:
    cpu = experiment_config(get_experiment(row), "cpu")
    short = experiment_config(get_experiment(row), "cpu-short")
    assert short.train.max_steps == max(1000, round(cpu.train.max_steps / 4))
    assert short.train.eval_interval == short.train.max_steps // 25
    assert (short.train.eval_max_tokens, cpu.train.eval_max_tokens) == (20_000, 50_000)
    assert (short.model, short.data) == (cpu.model, cpu.data)
    assert (short.train.lr, short.train.optimizer, short.train.schedule) == (
        cpu.train.lr,
        cpu.train.optimizer,
        cpu.train.schedule,
    )
    assert "a quarter of the cpu scale's steps" in describe_scale("cpu-short")


@pytest.mark.parametrize("row", ["rt-table1/transformer", "rt-table1/rtransformer"])
def test_cpu_mnist_is_one_pass_over_mnist_with_the_rt_image_schedule(row: str) -> None:
    from highway_transformer.presets.rt_tables import MNIST_STEPS_PER_EPOCH

    cpu = experiment_config(get_experiment(row), "cpu")
    config = experiment_config(get_experiment(row), "cpu-mnist")
    t = config.train
    assert t.max_steps == MNIST_STEPS_PER_EPOCH == 1719  # 55,000 images / batch 32, rounded up
    assert t.max_steps * config.data.batch_size >= 55_000
    # the published step schedule (/10 every 10 epochs) kept, not compressed: the run is the
    # published run's first epoch, at the published rate throughout
    assert (t.schedule, t.lr_step, t.lr, t.optimizer) == ("step", 10 * 1719, 1e-3, "adam")
    assert t.lr_step == get_experiment(row).config().train.lr_step
    assert cpu.train.lr_step == 10 * 1719 // 5  # the cpu scale compresses it with the steps
    assert (t.eval_interval, t.eval_max_tokens // 784) == (1719 // 20, 256)
    assert (config.model, config.data, config.task) == (cpu.model, cpu.data, cpu.task)
    assert (config.model.d_model, config.task.max_len, config.task.dataset) == (32, 784, "mnist")
    assert "a tenth of the cpu scale's steps, the step schedule's interval as published" in (
        describe_scale("cpu-mnist")
    )


def test_table5_analogue_at_cpu_short_runs_2000_steps_at_adam_1e3() -> None:
    t = experiment_config(get_experiment("ht-table5/l6-xl"), "cpu-short").train
    assert (t.max_steps, t.eval_interval, t.lr, t.warmup_steps) == (2000, 80, 1e-3, 0)


def test_every_row_builds_at_every_scale() -> None:
    # A scale that replaces the schedule must drop the rows' own schedule settings (the
    # step schedule's lr_step, the anneal rules), or validation refuses the row.
    for experiment in list_experiments():
        for scale in SCALES:
            experiment_config(experiment, scale)


@pytest.mark.parametrize(
    "row", ["ht-table1/t-l3+tanh", "ht-table3/t-l3", "ht-table5/l6-xl", "rt-table1/rtransformer"]
)
def test_cpu_adamw_replaces_every_rows_optimiser(row: str) -> None:
    c = experiment_config(get_experiment(row), "cpu-adamw")
    t = c.train
    assert (t.optimizer, t.lr, t.betas, t.weight_decay) == ("adamw", 1e-3, (0.9, 0.99), 0.01)
    assert (t.schedule, t.clip, t.min_lr) == ("cosine", 1.0, 0.0)
    assert t.warmup_steps == round(t.max_steps * 0.02)


def test_cpu_modern_is_cpu_adamw_with_pre_ln_and_torch_initialisation() -> None:
    modern = experiment_config(get_experiment("ht-table1/t-l3+sigmoid"), "cpu-modern")
    adamw = experiment_config(get_experiment("ht-table1/t-l3+sigmoid"), "cpu-adamw")
    assert (modern.model.norm, modern.model.final_norm, modern.model.init) == (
        "pre",
        "true",
        "torch",
    )
    assert modern.train == adamw.train
    changed = dataclasses.replace(
        modern.model, norm="post", final_norm=adamw.model.final_norm, init="uniform"
    )
    assert changed == adamw.model  # nothing else moves
    assert "every model with model.norm=pre" in describe_scale("cpu-modern")


def test_cpu_scales_state_their_deviations() -> None:
    assert "sgd learning rate x2" in describe_scale("cpu")
    assert (
        "50 evaluations of <= 50,000 tokens (anneal-when-stalled rules count these, not "
        "epochs)" in describe_scale("cpu")
    )
    assert "adam learning rate x4" in describe_scale("cpu")
    text = describe_scale("cpu-adamw")
    assert "adamw lr 0.001" in text and "not the papers' optimiser" in text
    assert "all train / all valid-test tokens" in text


def test_table5_rows_measure_validation_the_papers_way(tmp_path) -> None:  # noqa: ANN001
    import json
    import random

    from highway_transformer.experiments import run_experiments

    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(rng.choice("abcdefgh \n") for _ in range(6000)), encoding="utf-8")
    overrides = ["data.corpus=file", f"data.path={corpus}", "data.level=char",
                 "train.max_steps=4", "train.eval_interval=2"]  # fmt: skip
    (run_dir,) = run_experiments("ht-table5/l6-xl", tmp_path / "runs", "tiny", overrides=overrides)
    record = json.loads((run_dir / "protocol_eval.json").read_text(encoding="utf-8"))
    assert record["protocol"].startswith("validation during training (segment 128")
    assert "data.eval_seq_len=16" in record["overrides"]  # 128 at the tiny scale's lengths x1/8
    assert "model.memory.eval_mem_len=112" in record["overrides"]
    assert record["valid"]["bpc"] > 0
    from highway_transformer.report.report import write_report

    report = write_report([run_dir], tmp_path / "report")
    (row,) = report["paper_table"]
    assert row["eval_bpc_paper_protocol"]["mean"] == pytest.approx(record["valid"]["bpc"])
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "| ht-table5/l6-xl | " in index and "eval bpc, paper's protocol" in index

    # measured once: a finished row is not measured again, and one whose best/ weights were
    # dropped before it was measured says so (the report lists it as missing)
    messages: list[str] = []
    run_experiments("ht-table5/l6-xl", tmp_path / "runs", "tiny", overrides=overrides,
                    log=messages.append)  # fmt: skip
    assert messages == ["ht-table5/l6-xl seed 1: finished, skipped"]
    (run_dir / "protocol_eval.json").unlink()
    shutil.rmtree(run_dir / "best")
    run_experiments("ht-table5/l6-xl", tmp_path / "runs", "tiny", overrides=overrides,
                    log=messages.append)  # fmt: skip
    assert "its best/ weights are gone" in messages[-1]
    assert not (run_dir / "protocol_eval.json").exists()


def test_table5_rows_trained_in_parallel_are_measured_too(tmp_path) -> None:  # noqa: ANN001
    import json

    from highway_transformer.experiments import run_experiments

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abcdefgh \n" * 600, encoding="utf-8")
    overrides = ["data.corpus=file", f"data.path={corpus}", "data.level=char",
                 "train.max_steps=2", "train.eval_interval=2"]  # fmt: skip
    messages: list[str] = []
    rows = ["ht-table5/l6-xl", "ht-table5/l6-xl+sigmoid"]
    dirs = run_experiments(rows, tmp_path / "runs", "tiny", jobs=2, overrides=overrides,
                           log=messages.append)  # fmt: skip
    for run_dir in dirs:
        record = json.loads((run_dir / "protocol_eval.json").read_text(encoding="utf-8"))
        assert record["valid"]["bpc"] > 0
    assert sum("validation with the paper's protocol" in m for m in messages) == 2
    # each measured in a job slot of its own, not in the runner while slots wait
    assert sum("(validation the paper's way): started" in m for m in messages) == 2

    # a row that finished before this command, unmeasured, is measured as a job too
    (dirs[1] / "protocol_eval.json").unlink()
    messages.clear()
    run_experiments(rows, tmp_path / "runs", "tiny", jobs=2, overrides=overrides,
                    log=messages.append)  # fmt: skip
    assert messages[-2:] == [
        "ht-table5/l6-xl+sigmoid seed 1 (validation the paper's way): exit status 0",
        "ht-table5/l6-xl+sigmoid seed 1: validation with the paper's protocol",
    ]
    assert (dirs[1] / "protocol_eval.json").is_file()


def test_small_scale_is_uniform_across_a_table() -> None:
    configs = [scale_config(e.config(), "small") for e in table_experiments("ht-table1")]
    for c in configs:
        assert (c.model.d_model, c.model.d_inner, c.model.n_layers) == (128, 512, 3)
        assert (c.data.seq_len, c.data.context) == (100, 20)
        assert (c.train.max_steps, c.train.lr, c.train.seed) == (989, 2.0, 1111)
        assert c.data.max_train_tokens == 2_000_000
        assert (c.data, c.train) == (configs[0].data, configs[0].train)
    xl = scale_config(get_experiment("ht-table5/l6-xl+tanh-l1-3").config(), "tiny")
    m = xl.model
    assert m.n_heads * m.d_head == m.d_model == 32
    assert (m.memory.mem_len, m.memory.eval_clamp_len, xl.data.seq_len) == (64, 102, 64)
    assert (m.n_layers, m.gate.layers, xl.data.batch_size) == (6, "1-3", 4)
    paper = get_experiment("ht-table1/t-l3").config()
    assert scale_config(paper, "paper").to_dict() == paper.to_dict()
    with pytest.raises(ConfigError, match="Did you mean 'small'"):
        scale_config(paper, "smal")


def test_a_scale_caps_only_the_splits_a_task_reads_from_data() -> None:
    from highway_transformer.config import Config
    from highway_transformer.experiments.scale import scale_config

    generated = Config().replace(**{"task.name": "copy"})
    tiny = scale_config(generated, "tiny")  # valid: no cap on data the task generates
    assert tiny.data.max_train_tokens is tiny.data.max_eval_tokens is None
    lm = scale_config(Config(), "tiny")
    assert (lm.data.max_train_tokens, lm.data.max_eval_tokens) == (20_000, 2_000)


def test_quick_scale_brings_every_tasks_presets_to_its_recipe() -> None:
    from highway_transformer.presets import PRESETS, get_preset
    from highway_transformer.tasks import TASKS

    recipes = dict(SCALES["quick"].recipes)
    assert set(recipes) == set(TASKS) | {"lm-word"}  # a recipe for every task, and word LMs
    for name in PRESETS:
        preset = get_preset(name)
        level = corpus_level(preset.data) if preset.task.name == "lm" else ""
        recipe = recipes.get(f"lm-{level}", recipes[preset.task.name])
        c = scale_config(preset, "quick")
        heads = preset.model.n_heads  # kept: d_model is the recipe's nearest multiple of it
        assert c.model.n_heads == heads and c.model.d_model % heads == 0
        assert abs(c.model.d_model - recipe.d_model) <= heads / 2
        # d_inner keeps its ratio to d_model (a parameter-matched row keeps its difference)
        width = recipe.d_model / preset.model.d_model
        assert c.model.d_inner == max(1, round(preset.model.d_inner * width))
        t = c.train
        assert (t.max_steps, t.eval_interval) == (recipe.steps, recipe.steps // recipe.evaluations)
        assert (t.optimizer, t.lr, t.schedule, t.clip) == ("adamw", recipe.lr, "cosine", 1.0)
        assert t.warmup_steps == round(recipe.steps * 0.02)
        assert (c.model.norm, c.model.init) == ("pre", "torch")
        assert c.model.gate == preset.model.gate  # the rows' difference is kept
        for key, value in recipe.settings:
            section, _, field = key.partition(".")
            assert getattr(getattr(c, section), field) == value
    char = scale_config(get_preset("ht-table1/t-l3"), "quick")
    assert (char.data.seq_len, char.data.context, char.model.dropout) == (100, 20, 0.0)
    assert "lm: d_model 128" in describe_scale("quick")
    word = scale_config(get_preset("ht-table3/t-l3"), "quick")  # word PTB: its own recipe
    assert (word.data.seq_len, word.data.context, word.data.batch_size) == (40, 10, 64)
    assert (word.train.max_steps, word.model.dropout, word.model.init_embedding) == (
        2000,
        0.1,
        "normal",
    )
    assert "lm-word: d_model 128" in describe_scale("quick")


def test_quick_scale_refuses_a_task_without_a_recipe_or_a_setting_it_cannot_use() -> None:
    from highway_transformer.experiments.scale import QUICK_RECIPES
    from highway_transformer.presets import get_preset

    quick = SCALES["quick"]
    no_music = dataclasses.replace(
        quick, recipes=tuple((k, r) for k, r in quick.recipes if k != "music")
    )
    with pytest.raises(ConfigError, match="no recipe for task 'music'"):
        scale_config(get_preset("rt-table2/rtransformer"), no_music)
    # segment memory is the language model's: a music recipe setting it is refused
    music = dataclasses.replace(QUICK_RECIPES["music"], settings=(("model.memory.mem_len", 16),))
    with_memory = dataclasses.replace(quick, recipes=(("music", music),))
    with pytest.raises(ConfigError):
        scale_config(get_preset("rt-table2/rtransformer"), with_memory)


def test_scale_changes_name_each_setting_in_one_line_and_why_the_rate_changed() -> None:
    from highway_transformer.config import Config
    from highway_transformer.experiments.scale import scale_changes, scaled

    before = Config()  # SGD at lr 2.0, d_model 512: the cpu scale narrows it x0.25
    line = scale_changes(before, scaled(before, "cpu"), "cpu")
    assert line.startswith("scale cpu changed 6 settings: ") and "\n" not in line
    assert "model.d_model 512 -> 128" in line and "train.eval_max_tokens null -> 50000" in line
    assert "train.lr 2 -> 4 (sgd x2 for a model narrowed x0.25)" in line
    assert scale_changes(before, scaled(before, "paper"), "paper") == ""
    assert scale_changes(before, scaled(before, "none"), "none") == ""
