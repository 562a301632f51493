"""Every touch of mlx-lm beyond its public API, in one module (issue 35).

mlx-lm's public API covers loading, ``BatchGenerator.insert/remove/next/stats/close`` and its
``stream``, the cache helpers of ``mlx_lm.models.cache`` and the tokenizer wrapper. What serving
needs past that lives here and nowhere else, each piece typed by a ``Protocol`` of exactly the
attributes read or written:

- **the decoding rows of a ``BatchGenerator``** (``DecodingRows``): prompt-lookup drafts
  (``device/speculative.py``) verify several tokens in one pass, so they read and set a
  ``GenerationBatch``'s pending token and its logprobs, its per-row token context (penalties), token
  counts and stop matchers, and build its ``Response`` objects — nine private attributes;
- **the prefill chunk of the next step** (``set_prefill_step``): a public attribute mlx-lm reads at
  every step but documents only as a constructor argument;
- **a model's decoder layers** (``decoder_layers``): the list a model calls in order (``model.layers``),
  whose classes ``device/interrupt.py`` swaps for watched subclasses;
- **the cache contract a ``BatchGenerator`` drives** (``BatchCache``, ``cache_problems``): the methods
  mlx-lm's generator and models call on a batch cache (``merge`` on a prompt's first row cache,
  ``prepare`` / ``finalize`` around a prefill, ``filter`` / ``extend`` / ``extract`` as rows leave and
  join, ``make_mask``, ``trim``) and the quantized attention its ``scaled_dot_product_attention``
  takes when a cache has ``bits`` — what ``kv/cache.py``'s quantized batch cache implements, checked
  against mlx-lm's own ``BatchKVCache``; that attention's module-level name is where
  ``route_quantized_attention`` puts the CPU's split of it (``models/mlx/cpu_kv_attention.py``), and
  ``BatchKVCache.make_mask`` is where ``route_batch_mask`` puts a lone row's maskless step
  (``kv/masks.py``);
- **the tool-call syntax a chat template implies** (``infer_tool_parser``) — mlx-lm's
  ``_infer_tool_parser`` — and **a config's model classes** (``model_classes``), which has a public
  road (the ``mlx_lm.models.<type>`` module of ``MODEL_REMAPPING``'s name) taken when the private
  ``_get_classes`` is gone.

``problems(generator)`` checks a live generator against the contract in microseconds — the device
worker runs it when a model's batch opens — and names what is missing; ``MlxBatch`` then serves
without what depends on it (drafts; per-step prefill sizes; a quantized KV cache, via
``cache_problems``) and says so in one log line. The
contract test (``tests/engine/test_mlx_lm_adapter.py``) drives a real generator on the tiny model
through every attribute and behaviour relied on here: run it before lifting the upper bound on
``mlx-lm`` in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sized
from typing import Any, Protocol, cast

__all__ = [
    "TESTED",
    "BatchCache",
    "DecodingRows",
    "cache_problems",
    "decoder_layers",
    "infer_tool_parser",
    "model_classes",
    "problems",
    "route_batch_mask",
    "route_quantized_attention",
    "set_prefill_step",
]

log = logging.getLogger("tinytitan.mlx")

TESTED = "0.32"  # the mlx-lm minor this contract was checked against (pyproject bounds mlx-lm below the next)


class _TokenContext(Protocol):
    def update_and_fetch(self, tokens: Any) -> Any: ...


class _StopMatcher(Protocol):
    def advance(self, token: int) -> bool: ...


class _GenerationBatch(Protocol):
    """``mlx_lm.generate.GenerationBatch``: the rows past their prompt, decoding one token a step."""

    model: Any
    uids: list[int]
    tokens: list[list[int]]  # per row: the tokens its KV cache holds
    samplers: list[Any]
    logits_processors: list[list[Any]]
    max_tokens: list[int]
    prompt_cache: list[Any]  # the batch's KV cache, one entry per layer
    Response: type
    _next_tokens: Any  # (rows,) the pending tokens, sampled last step, still being computed
    _next_logprobs: list[Any]  # per row: the distribution each pending token was drawn from
    _token_context: list[_TokenContext]  # per row: the tokens its logits processors see
    _num_tokens: list[int]  # per row: tokens generated so far (counted against max_tokens)
    _matchers: list[_StopMatcher]  # per row: where its stop sequences stand

    def __len__(self) -> int: ...

    def extract_cache(self, idx: int) -> list[Any]: ...

    def filter(self, keep: list[int]) -> None: ...


class _BatchGenerator(Protocol):
    """``mlx_lm.generate.BatchGenerator``, as far as this module reads it."""

    prefill_step_size: int
    _generation_batch: _GenerationBatch
    _prompt_batch: Sized
    _unprocessed_sequences: Sized


_GENERATOR_STATE = ("_generation_batch", "_prompt_batch", "_unprocessed_sequences")
_BATCH_STATE = ("_next_tokens", "_next_logprobs", "_token_context", "_num_tokens", "_matchers")
_BATCH_PUBLIC = ("model", "uids", "tokens", "samplers", "logits_processors", "max_tokens", "prompt_cache")
_RESPONSE_FIELDS = ("uid", "token", "logprobs", "finish_reason", "prompt_cache", "all_tokens")


def problems(generator: Any) -> dict[str, list[str]]:
    """What ``generator`` (a fresh ``BatchGenerator``) lacks of this contract, by the feature that
    needs it: ``{"drafts": [...], "prefill chunks": [...]}``; empty when everything is there. Reads
    attributes only (no MLX call): cheap enough to run whenever a batch opens."""
    found: dict[str, list[str]] = {}
    drafts = [f"BatchGenerator.{name}" for name in _GENERATOR_STATE if not hasattr(generator, name)]
    batch = getattr(generator, "_generation_batch", None)
    if batch is not None:
        drafts += [f"GenerationBatch.{name}" for name in (*_BATCH_STATE, *_BATCH_PUBLIC) if not hasattr(batch, name)]
        methods = ("extract_cache", "filter")
        drafts += [f"GenerationBatch.{name}()" for name in methods if not callable(getattr(batch, name, None))]
        fields = getattr(getattr(batch, "Response", None), "__dataclass_fields__", {})
        if tuple(fields) != _RESPONSE_FIELDS:
            drafts.append(f"GenerationBatch.Response({', '.join(_RESPONSE_FIELDS)})")
        context, matchers = getattr(batch, "_token_context", None), getattr(batch, "_matchers", None)
        if isinstance(context, list) and context and not callable(getattr(context[0], "update_and_fetch", None)):
            drafts.append("TokenBuffer.update_and_fetch()")
        if isinstance(matchers, list) and matchers and not callable(getattr(matchers[0], "advance", None)):
            drafts.append("StopSequences.Matcher.advance()")
    if drafts:
        found["drafts"] = drafts
    if not isinstance(getattr(generator, "prefill_step_size", None), int):
        found["prefill chunks"] = ["BatchGenerator.prefill_step_size"]
    return found


class BatchCache(Protocol):
    """What mlx-lm 0.32's generator and model code call on one layer's batch cache (``BatchKVCache``'s
    contract); ``merge`` is called on a prompt's first row cache with every row's cache of that layer."""

    offset: Any  # (rows,) the next position of each row (RoPE)
    left_padding: Any  # (rows,)

    def update_and_fetch(self, keys: Any, values: Any) -> tuple[Any, Any]: ...

    def prepare(self, *, left_padding: Any = None, lengths: Any = None, right_padding: Any = None) -> None: ...

    def finalize(self) -> None: ...

    def filter(self, batch_indices: Any) -> None: ...

    def extend(self, other: Any) -> None: ...

    def extract(self, idx: int) -> Any: ...

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> Any: ...

    def trim(self, n: int) -> int: ...

    def is_trimmable(self) -> bool: ...

    def size(self) -> int: ...

    def empty(self) -> bool: ...

    @property
    def state(self) -> Any: ...

    @property
    def nbytes(self) -> int: ...


# BatchKVCache's public names in mlx-lm 0.32: a release that adds one may call it on our cache, one
# that drops one of the driven names has changed how its generator drives caches
_BATCH_CACHE_NAMES = frozenset(
    {"empty", "extend", "extract", "filter", "finalize", "from_state", "is_trimmable", "keys_and_values"}
    | {"make_mask", "merge", "nbytes", "prepare", "size", "state", "step", "trim", "update_and_fetch"}
)
_DRIVEN: tuple[str, ...] = (
    "update_and_fetch",
    "prepare",
    "finalize",
    "filter",
    "extend",
    "extract",
    "merge",
    "make_mask",
)
_DRIVEN += ("trim", "is_trimmable", "size", "empty", "state", "nbytes")


def cache_problems(batch_cache: type) -> list[str]:
    """What keeps ``batch_cache`` (a class standing in for ``BatchKVCache``) from serving this mlx-lm:
    a name mlx-lm's ``BatchKVCache`` gained or lost since the contract was checked, a driven method
    the class lacks, or no quantized attention. Empty when it serves; no MLX call."""
    from mlx_lm.models import base
    from mlx_lm.models.cache import BatchKVCache

    names = {n for n in dir(BatchKVCache) if not n.startswith("_")}
    found = [f"BatchKVCache.{n} (new)" for n in sorted(names - _BATCH_CACHE_NAMES)]
    found += [f"BatchKVCache.{n}" for n in _DRIVEN if n not in names]
    found += [f"{batch_cache.__name__}.{n}" for n in _DRIVEN if not hasattr(batch_cache, n)]
    if not callable(getattr(base, "quantized_scaled_dot_product_attention", None)):
        found.append("models.base.quantized_scaled_dot_product_attention")
    return found


def route_quantized_attention(route: Callable[..., Any]) -> Callable[..., Any]:
    """Have mlx-lm's ``scaled_dot_product_attention`` call ``route`` where it calls its quantized
    attention (a cache that has ``bits``), with the same arguments; returns the function it called.
    mlx-lm looks the function up in ``mlx_lm.models.base`` at every call."""
    from mlx_lm.models import base

    original: Callable[..., Any] = base.quantized_scaled_dot_product_attention
    base.quantized_scaled_dot_product_attention = route
    return original


def route_batch_mask(route: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``route`` mlx-lm's ``BatchKVCache.make_mask`` (called as a method, with mlx-lm's arguments:
    ``N``, ``return_array``, ``window_size``); returns the function it replaced. mlx-lm's models call it
    once per forward pass, through ``create_attention_mask``, before the cache takes the new keys."""
    from mlx_lm.models.cache import BatchKVCache

    original: Callable[..., Any] = BatchKVCache.make_mask
    BatchKVCache.make_mask = route
    return original


def set_prefill_step(generator: Any, tokens: int) -> None:
    """The most prompt tokens the generator's next step prefills (mlx-lm reads it at every step)."""
    cast(_BatchGenerator, generator).prefill_step_size = tokens


class DecodingRows:
    """The generator's decoding rows, when nothing waits to prefill: what a draft-and-verify step
    reads and moves on (``device/speculative.py``). Every method runs on the device thread."""

    def __init__(self, batch: _GenerationBatch) -> None:
        self._batch = batch

    @classmethod
    def of(cls, generator: Any) -> DecodingRows | None:
        """The decoding rows, or None when a prompt is still queued or prefilling (or none decodes)."""
        gen = cast(_BatchGenerator, generator)
        batch = gen._generation_batch
        if not len(batch) or len(gen._prompt_batch) or len(gen._unprocessed_sequences):
            return None
        return cls(batch)

    # -- public state of the batch (mlx-lm's own attribute names) -----------------------------------
    @property
    def model(self) -> Any:
        return self._batch.model

    @property
    def cache(self) -> list[Any]:
        """The batch's KV cache: one entry per layer, every row in it."""
        return self._batch.prompt_cache

    @property
    def uids(self) -> list[int]:
        return self._batch.uids

    @property
    def tokens(self) -> list[list[int]]:
        """Per row: the tokens its KV cache holds (the pending token not yet among them)."""
        return self._batch.tokens

    @property
    def samplers(self) -> list[Any]:
        return self._batch.samplers

    @property
    def processors(self) -> list[list[Any]]:
        return self._batch.logits_processors

    def room(self, i: int) -> int:
        """How many more tokens row ``i`` may emit after its pending one."""
        return self._batch.max_tokens[i] - self._batch._num_tokens[i] - 1

    # -- the pending tokens ---------------------------------------------------------------------------
    def pending(self) -> list[int]:
        """Each row's pending token (waits for the step that sampled it)."""
        tokens: list[int] = self._batch._next_tokens.tolist()
        return tokens

    def pending_logprobs(self, i: int) -> Any:
        return self._batch._next_logprobs[i]

    def set_pending(self, tokens: Any, logprobs: list[Any]) -> None:
        """The next step's pending tokens ``(rows,)`` and the distributions they were drawn from."""
        self._batch._next_tokens = tokens
        self._batch._next_logprobs = logprobs

    def context(self, i: int, tokens: Any) -> Any:
        """Row ``i``'s token context for its logits processors, with ``tokens`` appended."""
        return self._batch._token_context[i].update_and_fetch(tokens)

    # -- emitting -------------------------------------------------------------------------------------
    def emit(self, i: int, token: int, logprobs: Any) -> Any:
        """Row ``i`` emits ``token`` (now in its KV cache) as one plain step would: counted against its
        cap and its stop sequences; the ``Response`` plain decoding would give, with the row's cache
        and tokens when it ended here (its cache then holds what it emitted, no more)."""
        batch = self._batch
        batch.tokens[i].append(token)
        batch._num_tokens[i] += 1
        finish = "length" if batch._num_tokens[i] >= batch.max_tokens[i] else None
        if batch._matchers[i].advance(token):
            finish = "stop"
        if finish is None:
            return batch.Response(batch.uids[i], token, logprobs, None, None, None)
        return batch.Response(batch.uids[i], token, logprobs, finish, batch.extract_cache(i), batch.tokens[i])

    def keep(self, rows: list[int]) -> None:
        """Only ``rows`` (indices) stay in the batch."""
        if len(rows) < len(self._batch.uids):
            self._batch.filter(rows)


def decoder_layers(model: Any) -> list[Any]:
    """The decoder layers ``model`` calls in order, each with the hidden state first (``model.layers``
    in mlx-lm's model classes); empty when the model has no such list."""
    layers = getattr(model, "layers", None)
    return list(layers) if isinstance(layers, list) else []


def infer_tool_parser(chat_template: str) -> str | None:
    """The mlx-lm tool parser a chat template implies (mlx-lm's own inference from its markers), or
    None; None too, logged once, when this mlx-lm no longer has that inference."""
    try:
        from mlx_lm.tokenizer_utils import _infer_tool_parser
    except ImportError:
        _missing("tokenizer_utils._infer_tool_parser", "tool-call syntax is read from tokenizer_config.json only")
        return None
    inferred = _infer_tool_parser(_TemplateOnly(chat_template))
    return inferred if isinstance(inferred, str) else None


class _TemplateOnly:
    """Just enough of a tokenizer for mlx-lm's template-based inference."""

    def __init__(self, template: str) -> None:
        self.chat_template = template

    def get_vocab(self) -> dict[str, int]:
        return {}


def model_classes(config: dict[str, Any]) -> tuple[Any, Any]:
    """``(Model, ModelArgs)`` of mlx-lm's module for ``config``'s ``model_type``; ``ValueError`` when
    mlx-lm has none."""
    try:
        from mlx_lm.utils import _get_classes
    except ImportError:
        from mlx_lm.utils import MODEL_REMAPPING

        model_type = str(config["model_type"])
        try:
            module = importlib.import_module(f"mlx_lm.models.{MODEL_REMAPPING.get(model_type, model_type)}")
        except ImportError as exc:
            raise ValueError(f"Model type {model_type} not supported.") from exc
        return module.Model, module.ModelArgs
    classes: tuple[Any, Any] = _get_classes(config)
    return classes


_said: set[str] = set()


def _missing(what: str, consequence: str) -> None:
    if what not in _said:
        _said.add(what)
        log.warning("this mlx-lm has no %s: %s", what, consequence)
