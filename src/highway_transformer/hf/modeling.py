"""Our language model as a Transformers model: a ``PreTrainedConfig`` and a
``PreTrainedModel`` + ``GenerationMixin`` that wrap :class:`~highway_transformer.models.lm.
LanguageModel` for every family, with :class:`HighwayCache` carrying its decoding state.

The wrapped model computes exactly what our model computes (the same module, the same
weights): the Transformers class only translates arguments and outputs.

* Without a cache, a forward pass is one segment with the evaluation memory settings (XL),
  as the first window of our evaluation.
* ``use_cache=True`` on a forward pass starts a :class:`HighwayCache` of *segments*: for
  Transformer-XL the segment memory of ``model.memory.eval_mem_len`` states (our
  segment-by-segment forward), for the other families the incremental-decoding caches.
* ``generate`` starts a :class:`HighwayCache` of *generation*: the cache our own generation
  uses (:class:`~highway_transformer.models.generation.Stepper`), XL memory holding the whole
  context, so greedy decoding and beam search give our tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor

from ..config import ModelConfig, from_dict
from ..errors import CheckpointError, ConfigError, HighwayError
from ..extras import import_extra
from ..models.families import memory_policy
from ..models.lm import DecodeState, LanguageModel
from ..nn.memory import MemoryPolicy

transformers = import_extra("transformers", "the Transformers integration (highway_transformer.hf)")
outputs = import_extra("transformers.modeling_outputs", "the Transformers integration")

#: ``model_type`` of the exported configs (what ``AutoConfig`` reads in ``config.json``).
MODEL_TYPE = "highway-transformer"
#: Transformer-XL memory kept while generating: the whole context (as our generation).
GENERATION_MEMORY = 1 << 30


class HighwayConfig(transformers.PreTrainedConfig):
    """A Transformers config holding our :class:`~highway_transformer.config.ModelConfig`
    (``highway``, as a dict) and the vocabulary size."""

    model_type = MODEL_TYPE

    highway: dict | None = None
    vocab_size: int = 0
    use_cache: bool = True
    tie_word_embeddings: bool = True

    @classmethod
    def from_model_config(cls, model: ModelConfig, **kwargs: Any) -> HighwayConfig:
        return cls(
            highway=asdict(model),
            vocab_size=model.vocab_size,
            tie_word_embeddings=model.tie_weights,
            **kwargs,
        )

    def model_config(self) -> ModelConfig:
        """Our :class:`ModelConfig` (a one-line :class:`CheckpointError` where it does not
        fit this version)."""
        if not isinstance(self.highway, dict):
            raise CheckpointError(
                f"the {MODEL_TYPE} config has no 'highway' model settings; export the run "
                "with `highway export RUN --format hf --out DIR`"
            )
        try:
            return from_dict(ModelConfig, self.highway)
        except (HighwayError, TypeError, KeyError) as exc:
            raise CheckpointError(f"the {MODEL_TYPE} config does not fit: {exc}") from None


class HighwayCache:
    """The decoding state of :class:`HighwayForCausalLM` between calls (``cache``).

    One of three ways to continue a sequence, chosen when the cache starts:

    * ``state``: our incremental-decoding state (KV caches, LocalRNN windows; XL memory by
      ``policy``), one new position of work per token;
    * ``memory``: Transformer-XL segment memory, each call a segment (our evaluation);
    * ``context``: the tokens seen so far, recomputed each call (Shaw attention has no cache).
    """

    is_compileable = False
    is_croppable = False

    def __init__(self, model: LanguageModel, policy: MemoryPolicy | None, segments: bool) -> None:
        self.policy = policy
        self.mode = (
            "memory"
            if segments and model.uses_memory
            else ("state" if model.supports_cache else "context")
        )
        self.state: DecodeState | None = model.new_state() if self.mode == "state" else None
        self.memory: list[Tensor] | None = None
        self.context: Tensor | None = None
        self.length = 0

    @classmethod
    def for_generation(cls, model: LanguageModel) -> HighwayCache:
        """The cache of our generation: XL's evaluation clamp, memory for the whole context,
        no ``same_length`` window (:class:`~highway_transformer.models.generation.Stepper`)."""
        evaluation = memory_policy(model.config, evaluation=True)
        policy = (
            None
            if evaluation is None
            else dataclasses.replace(evaluation, mem_len=GENERATION_MEMORY, same_length=False)
        )
        return cls(model, policy, segments=False)

    @classmethod
    def for_segments(cls, model: LanguageModel) -> HighwayCache:
        """A cache of segments: XL memory with the evaluation settings of ``model.memory``."""
        return cls(model, memory_policy(model.config, evaluation=True), segments=True)

    @property
    def is_linear(self) -> list[bool]:
        return [False]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Positions seen so far."""
        return self.length

    def hidden(self, model: LanguageModel, ids: Tensor) -> Tensor:
        """Hidden states ``[B, L, D]`` of the new tokens ``ids`` after those seen."""
        if self.mode == "state":
            hidden, _ = model(ids, state=self.state, policy=self.policy)
        elif self.mode == "memory":
            hidden, self.memory = model(ids, memory=self.memory, policy=self.policy)
        else:
            self.context = ids if self.context is None else torch.cat([self.context, ids], 1)
            hidden, _ = model(self.context, policy=self.policy)
            hidden = hidden[:, -ids.shape[1] :]
        self.length += ids.shape[1]
        return hidden

    def reorder_cache(self, beam_idx: Tensor) -> None:
        """Keep (and duplicate) rows ``beam_idx`` (beam search)."""
        if self.state is not None:
            self.state.reorder(beam_idx)
        if self.memory is not None:
            self.memory = [m[beam_idx.to(m.device)] for m in self.memory]
        if self.context is not None:
            self.context = self.context[beam_idx.to(self.context.device)]


def check_right_padding(attention_mask: Tensor | None) -> None:
    """Our models have no attention mask: padding may only follow a row's tokens (a causal
    model never reads it), never precede them."""
    if attention_mask is None or bool(attention_mask.all()):
        return
    mask = attention_mask.long()
    if bool((mask[:, 1:] > mask[:, :-1]).any()):
        raise ConfigError(
            "padding before a row's tokens (left padding) is not supported: the model has no "
            "attention mask; pad on the right (tokenizer.padding_side='right') or give rows "
            "of equal length"
        )


class HighwayForCausalLM(transformers.PreTrainedModel, transformers.GenerationMixin):
    """Our :class:`LanguageModel` (``self.highway``) as a Transformers causal LM."""

    config_class = HighwayConfig
    base_model_prefix = "highway"
    main_input_name = "input_ids"
    _no_split_modules: list[str] = []

    def __init__(self, config: HighwayConfig) -> None:
        super().__init__(config)
        self.highway = LanguageModel(config.model_config())
        # what save_pretrained stores once and from_pretrained ties again
        self._tied_weights_keys = self.get_expanded_tied_weights_keys()
        self.post_init()

    @classmethod
    def from_language_model(cls, model: LanguageModel) -> HighwayForCausalLM:
        """A Transformers model holding a copy of ``model``'s weights."""
        wrapped = cls(HighwayConfig.from_model_config(model.config))
        wrapped.highway.load_state_dict(model.state_dict())
        return wrapped.to(next(model.parameters()).device).eval()

    def _init_weights(self, module: torch.nn.Module) -> None:
        """Nothing: :class:`LanguageModel` initialises itself as its config says."""

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict[str, str]:
        """``{tied name: name it shares}`` read from the module itself: the tie is our
        model's own (``model.tie_weights``, the adaptive input/softmax clusters)."""
        first: dict[int, str] = {}
        tied: dict[str, str] = {}
        for name, parameter in self.named_parameters(remove_duplicate=False):
            source = first.setdefault(id(parameter), name)
            if source != name:
                tied[name] = source
        return tied

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # prepare_inputs_for_generation starts a HighwayCache instead

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.highway.embedding

    def get_output_embeddings(self) -> torch.nn.Module | None:
        return None if self.highway.is_adaptive else self.highway.output

    def prepare_inputs_for_generation(
        self, input_ids: Tensor, cache: HighwayCache | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Every call of ``generate`` gets a generation cache; without ``use_cache`` a fresh
        one each step (the whole context recomputed, as ``use_cache=False`` of ours)."""
        if kwargs.get("use_cache") is False or cache is None:
            cache = HighwayCache.for_generation(self.highway)
        inputs = super().prepare_inputs_for_generation(input_ids, cache=cache, **kwargs)
        inputs.pop("position_ids", None)  # positions are counted by the cache
        return inputs

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        cache: HighwayCache | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        inputs_embeds: Tensor | None = None,
        return_dict: bool | None = None,
        past_key_values: HighwayCache | None = None,
        num_items_in_batch: int | Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        """Logits ``[B, L, V]`` of ``input_ids [B, L]`` (after those of ``cache``); with
        ``labels`` the mean NLL of ``labels[:, 1:]`` (-100 ignored), as every causal LM of
        Transformers. ``past_key_values`` is the older name of ``cache``."""
        if inputs_embeds is not None or input_ids is None:
            raise ConfigError("give input_ids: the model embeds its own tokens")
        check_right_padding(attention_mask)
        cache = cache if cache is not None else past_key_values
        if cache is not None and not isinstance(cache, HighwayCache):
            raise ConfigError(
                f"cache must be the HighwayCache this model returned, not {type(cache).__name__}"
            )
        if use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if cache is None and use_cache:
            cache = HighwayCache.for_segments(self.highway)
        hidden = self._hidden(input_ids, cache)
        logits = self.highway.logits(hidden)
        loss = None if labels is None else self._loss(hidden, labels, num_items_in_batch)
        return outputs.CausalLMOutputWithPast(
            loss=loss, logits=logits, cache=cache if use_cache else None
        )

    def _hidden(self, input_ids: Tensor, cache: HighwayCache | None) -> Tensor:
        if cache is not None:
            return cache.hidden(self.highway, input_ids)
        policy = None if self.training else memory_policy(self.highway.config, evaluation=True)
        hidden, _ = self.highway(input_ids, policy=policy)
        return hidden

    def _loss(
        self, hidden: Tensor, labels: Tensor, num_items_in_batch: int | Tensor | None
    ) -> Tensor:
        targets = labels[:, 1:].to(hidden.device)
        nll = self.highway.token_nll(hidden[:, :-1], targets)
        count = (targets != -100).sum().clamp_min(1) if num_items_in_batch is None else None
        return nll.sum() / (count if count is not None else num_items_in_batch)


def register() -> None:
    """Make ``AutoConfig`` / ``AutoModelForCausalLM`` know :data:`MODEL_TYPE` (idempotent)."""
    transformers.AutoConfig.register(MODEL_TYPE, HighwayConfig, exist_ok=True)
    transformers.AutoModelForCausalLM.register(HighwayConfig, HighwayForCausalLM, exist_ok=True)
