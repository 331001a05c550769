"""The R-Transformer table presets (``presets/rt_tables.py``): every preset validates, and the
pixel and music rows carry the RT code's settings."""

from __future__ import annotations

import torch

from highway_transformer.presets import rt_tables
from highway_transformer.tasks import build_task_model
from highway_transformer.validation import validate


def test_rt_presets_build():
    names = set(rt_tables.PRESETS)
    for table in ("rt-table1", "rt-table2"):
        for family in ("transformer", "rtransformer"):
            assert {f"{table}/{family}", f"{table}/{family}+sigmoid"} <= names
    assert {"digits/transformer", "digits/rtransformer", "seq2seq/toy"} <= names
    for name, (description, build) in rt_tables.PRESETS.items():
        config = validate(build())
        assert config.source and description
        assert config.task.name in ("pixels", "music", "copy", "adding", "seq2seq"), name
        if "+sigmoid" in name:
            assert (config.model.gate.kind, config.model.gate.activation) == ("sdu", "sigmoid")
    mnist = rt_tables.PRESETS["rt-table1/rtransformer"][1]()
    assert (mnist.model.n_layers, mnist.model.d_model, mnist.model.n_heads) == (8, 32, 2)
    assert (mnist.model.local_rnn.window, mnist.model.local_rnn.per_block) == (7, 2)
    assert (mnist.train.optimizer, mnist.train.lr, mnist.data.batch_size) == ("adam", 1e-3, 32)
    notts = rt_tables.PRESETS["rt-table2/rtransformer"][1]()
    assert (notts.model.n_layers, notts.model.d_model, notts.model.n_heads) == (3, 160, 4)
    assert (notts.model.local_rnn.window, notts.model.dropout) == (6, 0.1)
    # audio/experiment.py clips before backward() (nothing) and anneals after epoch 10 when a
    # validation is worse than each of the last 3.
    t = notts.train
    assert t.clip == 0.0
    assert (t.anneal_rule, t.anneal_window, t.anneal_after, t.anneal_factor) == (
        "window-strict",
        3,
        10,
        0.1,
    )
    assert t.eval_interval == rt_tables.NOTTINGHAM_STEPS_PER_EPOCH  # a validation per epoch
    model = build_task_model(rt_tables.PRESETS["rt-table1/transformer"][1]())
    assert model(torch.rand(1, 784, 1)).shape == (1, 10)
