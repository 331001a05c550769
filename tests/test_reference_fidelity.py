"""Our presets' models against oracles written from the reference code's semantics.

The oracles restate, operation by operation and in float64, what the public reference code
computes (docs/fidelity.md): the Transformer-XL LM of ``kimiyoung/transformer-xl``
``pytorch/mem_transformer.py`` (also the Highway Transformer authors' fork, whose SDU gate
is one more case) and the R-Transformer block of ``DSE-MSU/R-transformer``
``models/RTransformer.py``. They read our model's parameters by name (the weight mapping) and
compose the equations of :mod:`highway_transformer.nn.reference` (the code's ``_rel_shift``,
``dec_attn_mask``, ``PositionalEmbedding``, ``_update_mems``, LayerNorms, gates); they share
nothing with the library's fast path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from highway_transformer.config import (
    DataConfig,
    GateConfig,
    LocalRNNConfig,
    MemoryConfig,
    ModelConfig,
)
from highway_transformer.models.builders import build_block
from highway_transformer.models.families import (
    has_final_norm,
    memory_policy,
    output_dropout,
    position_dropout,
    scales_embedding,
)
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn import reference
from highway_transformer.nn.memory import MemoryPolicy
from highway_transformer.nn.norms import RTLayerNorm, build_norm
from highway_transformer.presets import PRESETS, get_preset
from highway_transformer.tasks.lm_scoring import evaluate
from highway_transformer.validation import validate

V, D, H, DH, BATCH, N_LAYERS = 11, 8, 2, 4, 2, 2


# --------------------------------------------------------------------------- XL oracle


@dataclass(frozen=True)
class Case:
    norm: str = "post"
    tgt_len: int = 4
    mem_len: int = 5
    clamp_len: int = 0
    same_length: bool = False
    untie_r: bool = False
    tie: bool = True
    gate: str = "none"  # none | sdu (the HT fork's glu_type 2, σ)


CASES = {
    "post-tied-shared": Case(),
    "pre-clamp-same-length-mem<tgt-untied-uv": Case(
        norm="pre", mem_len=3, clamp_len=3, same_length=True, untie_r=True
    ),
    "post-same-length-filling-mem>tgt-untied-emb": Case(
        mem_len=6, clamp_len=2, same_length=True, tie=False
    ),
    "pre-no-clamp-untied-all": Case(norm="pre", tgt_len=3, mem_len=4, untie_r=True, tie=False),
    "post-sdu-gate-same-length": Case(tgt_len=3, same_length=True, gate="sdu"),
}


def xl_config(case: Case) -> ModelConfig:
    return ModelConfig(
        family="xl",
        attention="relative",
        vocab_size=V,
        d_model=D,
        n_layers=N_LAYERS,
        n_heads=H,
        d_head=DH,
        d_inner=16,
        dropout=0.0,
        norm=case.norm,
        tie_weights=case.tie,
        untie_r=case.untie_r,
        init="normal",
        gate=GateConfig(kind=case.gate, activation="sigmoid"),
        memory=MemoryConfig(
            mem_len=case.mem_len, clamp_len=case.clamp_len, same_length=case.same_length
        ),
    )


def randomised(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Large random parameters (LayerNorm weights around 1) so that every term matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.4)
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)
    return model


def ref_layer(P: dict, i: int, case: Case, w, r, u, v, mask, mems):
    """``RelPartialLearnableDecoderLayer``: attention (glu_type 0 or 2) then ``PositionwiseFF``,
    each through the code's pre- or post-LN connection, time-major ``[L, B, D]``."""
    a, ff = f"blocks.{i}.sublayers.0.attention", f"blocks.{i}.sublayers.1"

    def norm(k: int) -> Callable[[Tensor], Tensor]:
        weight, bias = (P[f"blocks.{i}.connections.{k}.norm.{n}"] for n in ("weight", "bias"))
        return lambda x: reference.layer_norm(x, weight, bias, 1e-5)

    def combine(k: int) -> reference.Combine:
        # the fork's g = σ(w1(x)) * w2(x); our combiner stores [W1; W2] as one projection
        if case.gate != "sdu":
            return reference.residual
        weight = P[f"blocks.{i}.connections.{k}.combiner.proj.weight"]
        bias = P[f"blocks.{i}.connections.{k}.combiner.proj.bias"]
        return lambda x, y: reference.sdu(x, y, weight[:D], bias[:D], weight[D:], bias[D:])

    def attention(h: Tensor, context: Tensor) -> Tensor:
        qlen, bsz = h.shape[:2]
        w_heads = torch.cat([context, h], 0) @ P[f"{a}.qkv.weight"].T
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        klen = w_head_k.size(0)
        r_head_k = (r @ P[f"{a}.r_net.weight"].T).view(klen, H, DH)
        vec = reference.rel_attention(
            w_head_q[-qlen:].view(qlen, bsz, H, DH),
            w_head_k.view(klen, bsz, H, DH),
            w_head_v.view(klen, bsz, H, DH),
            r_head_k, u, v, mask, 1 / DH**0.5,
        )  # fmt: skip
        return vec.reshape(qlen, bsz, H * DH) @ P[f"{a}.out.weight"].T

    def core(x: Tensor) -> Tensor:
        weights = (P[f"{ff}.fc{n}.{kind}"] for n in (1, 2) for kind in ("weight", "bias"))
        return reference.position_wise_ff(x, *weights)

    connect = reference.pre_ln_connection if case.norm == "pre" else reference.post_ln_connection
    out = connect(w, attention, norm(0), combine(0), context=mems)
    return connect(out, core, norm(1), combine(1))


def ref_segment(P: dict, case: Case, inp: Tensor, tgt: Tensor, mems: list[Tensor]):
    """``MemTransformerLM.forward`` (attn_type 0, dropout 0): mean NLL and the new mems."""
    qlen = inp.shape[0]
    emb = P["embedding.weight"]
    word_emb = emb[inp] * D**0.5  # AdaptiveEmbedding's emb_scale
    mlen = mems[0].size(0)
    klen = mlen + qlen
    mask = reference.xl_attention_mask(qlen, mlen, case.same_length, window=case.mem_len)
    pos_emb = reference.relative_sinusoid(klen, D, case.clamp_len)
    core_out = word_emb
    hids = [core_out]
    for i in range(N_LAYERS):
        a = f"blocks.{i}.sublayers.0.attention"
        u = P[f"{a}.r_w_bias"] if case.untie_r else P["relative.r_w_bias"]
        v = P[f"{a}.r_r_bias"] if case.untie_r else P["relative.r_r_bias"]
        core_out = ref_layer(P, i, case, core_out, pos_emb, u, v, mask, mems[i])
        hids.append(core_out)
    new_mems = reference.xl_update_memory(mems, hids, case.mem_len)
    out_w = emb if case.tie else P["output.weight"]
    logits = core_out @ out_w.T + P["output.bias"]
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    return loss, new_mems


def segments(case: Case, n: int = 3, seed: int = 1) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(seed)
    stream = torch.randint(0, V, (BATCH, n * case.tgt_len + 1), generator=g)
    return [
        (stream[:, s : s + case.tgt_len], stream[:, s + 1 : s + 1 + case.tgt_len])
        for s in range(0, n * case.tgt_len, case.tgt_len)
    ]


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_xl_lm_matches_reference_over_three_segments(case: Case) -> None:
    torch.manual_seed(0)
    model = randomised(LanguageModel(xl_config(case)).double()).train()
    policy = MemoryPolicy(case.mem_len, case.clamp_len, case.same_length)
    P = {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}

    memory, mems = None, [torch.zeros(0, BATCH, D, dtype=torch.float64)] * (N_LAYERS + 1)
    ours_total, ref_total = 0.0, 0.0
    for x, y in segments(case):
        hidden, memory = model(x, memory=memory, policy=policy)
        loss = model.token_nll(hidden, y).mean()
        ref_loss, mems = ref_segment(P, case, x.T, y.T, mems)
        torch.testing.assert_close(loss, ref_loss, atol=1e-6, rtol=0)
        assert memory is not None and len(memory) == N_LAYERS
        for ours, ref in zip(memory, mems[:N_LAYERS], strict=True):
            torch.testing.assert_close(ours, ref.transpose(0, 1), atol=1e-6, rtol=0)
        ours_total, ref_total = ours_total + loss, ref_total + ref_loss

    ours_total.backward()
    ref_total.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and P[name].grad is not None, name
        torch.testing.assert_close(p.grad, P[name].grad, atol=1e-6, rtol=0, msg=name)
        assert P[name].grad.abs().max() > 0, name


def lm_ordered_iterator(data: Tensor, bsz: int, bptt: int):
    """``LMOrderedIterator`` of ``pytorch/data_utils.py`` (``ext_len`` 0), transcribed."""
    n_step = data.size(0) // bsz
    data = data.narrow(0, 0, n_step * bsz)
    data = data.view(bsz, -1).t().contiguous()
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, data.size(0) - 1 - i)
        yield data[i : i + seq_len], data[i + 1 : i + 1 + seq_len], seq_len


def reference_evaluate(P: dict, case: Case, ids: Tensor, bsz: int) -> tuple[float, int]:
    """``evaluate()`` of ``pytorch/eval.py``: the mean of each segment's mean loss weighted by
    its length, memory carried; also the number of targets it scored."""
    total_len, total_loss, scored = 0, 0.0, 0
    mems = [torch.zeros(0, bsz, D, dtype=torch.float64)] * (N_LAYERS + 1)
    for data, target, seq_len in lm_ordered_iterator(ids, bsz, case.tgt_len):
        loss, mems = ref_segment(P, case, data, target, mems)
        total_loss += seq_len * loss.item()
        total_len += seq_len
        scored += target.numel()
    return total_loss / total_len, scored


@pytest.mark.parametrize(
    ("name", "length", "bsz"),
    [("post-tied-shared", 41, 3), ("post-same-length-filling-mem>tgt-untied-emb", 50, 4),
     ("pre-no-clamp-untied-all", 23, 1)],
)  # fmt: skip
def test_reference_eval_layout_is_the_xl_evaluation(name: str, length: int, bsz: int) -> None:
    """``data.eval_layout=reference``: the loss and the scored targets of the XL code's
    evaluation (its iterator, its model, its averaging), float64."""
    case = CASES[name]
    torch.manual_seed(0)
    model = randomised(LanguageModel(xl_config(case)).double()).eval()
    P = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(0, V, (length,), generator=torch.Generator().manual_seed(2))
    expected, scored = reference_evaluate(P, case, ids, bsz)
    data = DataConfig(seq_len=case.tgt_len, eval_batch_size=bsz, eval_layout="reference")
    result = evaluate(model, ids, data)
    assert result.tokens == scored == bsz * (length // bsz - 1)
    assert result.loss == pytest.approx(expected, rel=1e-9, abs=0)
    every = evaluate(model, ids, DataConfig(seq_len=case.tgt_len, eval_batch_size=bsz))
    assert every.tokens == length - 1  # the default scores every target once


def test_same_length_mask_uses_the_configured_memory_length() -> None:
    """First segment, no memory held yet: with M=3 < L=4 each query sees at most 3 keys."""
    case = CASES["pre-clamp-same-length-mem<tgt-untied-uv"]
    model = randomised(LanguageModel(xl_config(case)).double()).eval()
    x, _ = segments(case)[0]
    same = model(x, policy=MemoryPolicy(3, 0, True))[0]
    causal = model(x, policy=MemoryPolicy(3, 0, False))[0]
    torch.testing.assert_close(same[:, :3], causal[:, :3], atol=1e-12, rtol=0)
    assert not torch.allclose(same[:, 3], causal[:, 3])


# --------------------------------------------------------------------------- dropout sites


def _xl_dropout_model(**kwargs: float) -> LanguageModel:
    config = xl_config(Case())
    config = ModelConfig(**{**config.__dict__, **kwargs})
    torch.manual_seed(0)
    return randomised(LanguageModel(config))


@pytest.mark.parametrize("site", ["dropout_pos", "dropout_out"])
def test_dropout_sites_active_in_training_only(site: str) -> None:
    """Dropout on R and on the last hidden state (XL code): random in train, off in eval."""
    model = _xl_dropout_model(**{site: 0.5})
    plain = _xl_dropout_model()
    x, _ = segments(Case())[0]
    model.eval()
    torch.testing.assert_close(model(x)[0], plain.eval()(x)[0], atol=0, rtol=0)
    model.train()
    torch.manual_seed(1)
    a = model(x)[0]
    torch.manual_seed(2)
    b = model(x)[0]
    assert not torch.allclose(a, b)
    if site == "dropout_out":  # a dropped hidden state is exactly zero (inverted dropout)
        assert (a == 0).float().mean() > 0.2


def test_xl_presets_use_the_reference_dropout_sites() -> None:
    m = get_preset("ht-table5/l6-xl").model
    assert position_dropout(m) == output_dropout(m) == m.dropout == 0.1
    assert (scales_embedding(m), has_final_norm(m), m.untie_r) == (True, False, False)
    model = LanguageModel(m.__class__(**{**m.__dict__, "vocab_size": V, "n_layers": 1}))
    assert model.relative is not None and model.relative.dropout.p == 0.1
    assert model.output_dropout.p == 0.1
    assert model.embedding_scale == math.sqrt(512)


# --------------------------------------------------------------------------- RT block


def ref_rt_block(block, x: Tensor, window: int, n_rnn: int) -> Tensor:
    """``Block.forward`` of the RT code (:func:`reference.r_transformer_block`), the weights
    read from our block: N ``LocalRNNLayer``, ``MHPooling``, the FFN."""
    attention = block.sublayers[n_rnn].attention
    ffn = block.sublayers[n_rnn + 1]
    return reference.r_transformer_block(
        x,
        window,
        norms=[(c.norm.weight, c.norm.bias) for c in block.connections],
        rnns=[block.sublayers[k].local_rnn.rnn for k in range(n_rnn)],
        attention=reference.attention_weights(attention.qkv, attention.out),
        n_heads=H,
        ffn=(ffn.fc1.weight, ffn.fc1.bias, ffn.fc2.weight, ffn.fc2.bias),
    )


@pytest.mark.parametrize("n_rnn", [1, 2])
def test_rt_block_with_rt_layer_norm_matches_reference(n_rnn: int) -> None:
    config = ModelConfig(
        family="rtransformer",
        positional="none",
        d_model=D,
        n_heads=H,
        d_inner=4 * D,
        n_layers=1,
        dropout=0.0,
        norm="pre",
        layer_norm="rt",
        local_rnn=LocalRNNConfig(cell="gru", window=3, per_block=n_rnn),
    )
    torch.manual_seed(0)
    block = randomised(build_block(config, 0).double())
    assert all(isinstance(c.norm, RTLayerNorm) for c in block.connections)
    x = torch.randn(2, 7, D, dtype=torch.float64, requires_grad=True)
    ours = block(x)
    ref = ref_rt_block(block, x, 3, n_rnn)
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)
    g_ours = torch.autograd.grad(ours.sum(), [x, *block.parameters()])
    g_ref = torch.autograd.grad(ref.sum(), [x, *block.parameters()])
    for a, b in zip(g_ours, g_ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_rt_layer_norm_differs_from_torch_layer_norm() -> None:
    """The RT code's LayerNorm is not nn.LayerNorm: the difference is visible at d 128."""
    torch.manual_seed(0)
    x = torch.randn(4, 128) * 3
    rt, plain = build_norm("rt", 128), build_norm("torch", 128)
    torch.testing.assert_close(rt(x), reference.rt_layer_norm(x, rt.weight, rt.bias))
    assert (rt(x) - plain(x)).abs().max() > 1e-3


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_rt_layer_norm_backward_is_the_formulas(dtype: torch.dtype, tolerance: float) -> None:
    """The hand-written backward against autograd through the RT code's formula."""
    torch.manual_seed(1)
    norm = build_norm("rt", 16).to(dtype)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    x = (torch.randn(3, 5, 16, dtype=dtype) * 2 + 1).requires_grad_()
    upstream = torch.randn(3, 5, 16, dtype=dtype)
    params = (x, norm.weight, norm.bias)
    ours = norm(x)
    ref = reference.rt_layer_norm(x, norm.weight, norm.bias)
    torch.testing.assert_close(ours, ref, atol=tolerance, rtol=0)
    got = torch.autograd.grad(ours, params, upstream)
    want = torch.autograd.grad(ref, params, upstream)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=tolerance * 10, rtol=0)


def test_rt_layer_norm_of_a_constant_row_has_a_finite_gradient() -> None:
    norm = build_norm("rt", 8)
    x = torch.full((2, 8), 3.0).requires_grad_()
    norm(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_rt_presets_use_the_rt_layer_norm() -> None:
    for name in PRESETS:
        model = get_preset(name).model
        if model.family == "rtransformer":
            assert model.layer_norm == "rt" and not has_final_norm(model), name


# --------------------------------------------------------------------------- memory policy


def test_evaluation_leaves_the_model_untouched() -> None:
    """Evaluation runs with the evaluation policy but flips no setting on the model."""
    config = xl_config(Case())
    config.memory = MemoryConfig(mem_len=3, eval_mem_len=6, eval_clamp_len=2,
                                 eval_same_length=True)  # fmt: skip
    torch.manual_seed(0)
    model = LanguageModel(config).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    attrs = dict(vars(model))
    ids = torch.randint(0, V, (60,))
    data = DataConfig(batch_size=2, seq_len=4, eval_batch_size=2)
    result = evaluate(model, ids, data)
    assert model.training and vars(model).keys() == attrs.keys()
    assert all(vars(model)[k] is v for k, v in attrs.items() if k != "_modules")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # The evaluation policy is what ran: it differs from the training one.
    train_policy = evaluate(model, ids, data, policy=memory_policy(config))
    assert result.loss != train_policy.loss


def test_memory_policy_on_a_model_without_memory_is_an_error() -> None:
    from highway_transformer.errors import ConfigError

    model = LanguageModel(ModelConfig(vocab_size=V, d_model=D, n_heads=H, d_inner=16))
    with pytest.raises(ConfigError, match="relative attention"):
        model(torch.zeros(1, 3, dtype=torch.long), policy=MemoryPolicy(4))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model.memory.mem_len": 8}, "family=xl only"),
        ({"model.family": "xl", "model.attention": "dot"}, "model.attention=relative"),
        ({"model.dropout_pos": 0.1}, "family=xl only"),
        ({"model.untie_r": True}, "family=xl only"),
        ({"model.gate.kind": "highway", "model.gate.activation": "tanh"}, "sigmoid"),
        ({"model.dropout_out": 0.1, "task.name": "copy"}, "language models only"),
        ({"model.layer_norm": "rms"}, "layer_norm.*'rms'; choose one of: rmsnorm, rt, torch"),
        ({"model.final_norm": "maybe"}, "final_norm"),
        ({"data.eval_layout": "reference"}, "eval_layout=reference .* model.family=xl"),
        ({"data.eval_layout": "xl"}, "evaluation layout"),
        ({"data.vocab_splits": "train"}, "vocab_splits applies to data.corpus=enwik8-xl or"),
        ({"data.vocab_splits": "valid", "data.corpus": "text8"}, "vocabulary splits"),
        (
            {"data.eval_layout": "reference", "model.family": "xl", "data.context": 2},
            "evaluation context is 2",
        ),
        (
            {"data.eval_layout": "reference", "model.family": "xl", "task.name": "copy"},
            "task.name=lm",
        ),
    ],
)
def test_settings_that_do_not_apply_are_errors(overrides: dict, message: str) -> None:
    from highway_transformer.config import Config
    from highway_transformer.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        validate(Config().replace(**overrides))


def test_flag_options_accept_yaml_booleans() -> None:
    from highway_transformer.config import Config
    from highway_transformer.validation import build_config

    config = build_config(Config(), None, ["model.final_norm=true", "model.embedding_scale=no"])
    assert has_final_norm(config.model) and not scales_embedding(config.model)
