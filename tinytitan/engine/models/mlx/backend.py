"""The mlx backend: a real model through mlx-lm on the one generation path (issue #3).

Construction resolves the model (local directory or hub id) and reads its facts — config,
generation defaults, chat template, reasoning levels — without loading weights, so ``info`` is
cheap and a missing template or model is a startup error (``ModelUnavailable``). The tokenizer
loads on first use (rendering or counting needs no weights, and no MLX); the weights load in
``load()`` on the device thread and ``unload()`` releases them (and the prompt cache).

Generation runs in the ``MlxBatch`` the device worker steps (``open_batch``): up to
``max_concurrent`` requests decode together, each a row that starts from the prompt cache's longest
prefix; in a distributed group, rank 0's ``LockstepBatch``. The ``Job`` turns the token ids into
text with ``decoder()`` (mlx-lm's streaming detokenizer) and parses it with the markers and tool
parser mlx-lm's ``TokenizerWrapper`` knows for the model family.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from tinytitan import cpu_share
from tinytitan.engine.device import thread as device_thread
from tinytitan.engine.device.mlx_batch import PREFILL_STEP, MlxBatch
from tinytitan.engine.device.placement import DTYPES, compute_dtype
from tinytitan.engine.errors import InvalidRequest, ShuttingDown
from tinytitan.engine.kv.form import KvForm, served_form, token_bytes
from tinytitan.engine.models.base import Backend, Decoder, Prompt
from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.mlx import cpu_attention, cpu_kv_attention, loading
from tinytitan.engine.models.mlx.detokenizer import Detokenizer
from tinytitan.engine.models.mlx.facts import read_facts
from tinytitan.engine.models.mlx.resolve import ModelSource, resolve_model
from tinytitan.engine.models.mlx.syntax import HARMONY, raw_inputs, wrap_parser
from tinytitan.engine.models.mlx.template import (
    ends_in_open_thought,
    template_messages,
    template_tools,
    thinking_kwargs,
)
from tinytitan.engine.models.mlx.vision import Vision
from tinytitan.engine.output.parser import EventParser, Markers, ParseOptions, ToolParser, json_tool_parser
from tinytitan.engine.prompt_cache.disk import DiskTier
from tinytitan.engine.prompt_cache.memory import PromptCache
from tinytitan.engine.request import ModelInfo, Tool, ValidatedRequest

if TYPE_CHECKING:
    from tinytitan.engine.device.batch import Batch, Row
    from tinytitan.engine.device.distributed import Distributed

__all__ = ["PREFILL_STEP", "MlxBackend"]

log = logging.getLogger("tinytitan.mlx")


class MlxBackend(Backend):
    def __init__(
        self,
        model: str | None,
        model_id: str | None = None,
        max_context: int | None = None,
        prompt_cache_entries: int = 4,
        prompt_cache_mib: int = 2048,
        dtype: str = "auto",
        prompt_cache_dir: str | None = None,
        prompt_cache_disk_mib: int = 8192,
        max_concurrent: int = 1,
        drafts: bool = True,
        draft_model: str | None = None,
        device: str | None = None,
        distributed: Distributed | None = None,
        kv: KvForm | None = None,
    ) -> None:
        if dtype not in DTYPES:
            choices = ", ".join(DTYPES)
            raise ModelUnavailable(f"unknown dtype {dtype!r}; choose from {choices}")
        self.source: ModelSource = resolve_model(model, model_id)
        facts = read_facts(self.source.path, self.source.model_id, max_context)
        self.config = facts.config
        self.template = facts.template
        self.syntax = facts.syntax
        self._info = facts.info
        self.vision = Vision.of(self.source.path, self.config, grouped=distributed is not None)  # None: text only
        if self.syntax is None:
            log.warning(
                "%s: no tool-call parser knows this chat template's syntax; serving it without tools "
                "(requests' tools are not shown to the model)",
                self.source.model_id,
            )
        self.dtype = dtype
        self.device = device  # "cpu" runs on the CPU where an accelerator is the default (<id>@cpu)
        self.kv = served_form(kv, self.config, self.source.model_id)  # the KV cache's form (--kv-bits), or None
        self.kv = self.kv if self.vision is None else self.vision.kv_form(self.kv, self.source.model_id)
        disk = DiskTier(prompt_cache_dir, prompt_cache_disk_mib * 2**20, kv=self.kv) if prompt_cache_dir else None
        self.prompt_cache = PromptCache(prompt_cache_entries, prompt_cache_mib * 2**20, disk=disk)
        self._identity: str | None = None
        self.distributed = distributed  # serving as one rank of an mlx.distributed group (issue #19)
        self.max_concurrent = 1 if distributed is not None else max(1, max_concurrent)  # lockstep: one at a time
        self.drafts = drafts  # prompt-lookup drafts (device/speculative.py)
        self.tokens_generated = 0  # every token sampled, ever (tests watch it for cancellation)
        self.batch: MlxBatch | None = None  # the open batch (tests and benchmarks read its steps)
        self._load_lock = threading.RLock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self._lltokenizer: Any = None
        self._harmony: Any = None
        self.last_mask: Any = None  # the grammar mask of the latest constrained generation (benchmarks)
        # a smaller model of the same tokenizer drafting where the lookup has none (--draft-model)
        self.draft_source = None
        if draft_model and drafts:
            self.draft_source = loading.draft_source(draft_model, self.tokenizer.get_vocab(), self._info.id)
        self._draft: Any = None

    # -- facts ------------------------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def note(self) -> str | None:
        return self.source.note

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> Any:
        """The loaded weights (None until ``load``; this rank's shard in a distributed group)."""
        return self._model

    @property
    def identity(self) -> str:
        """The model identity prompt-cache snapshots are keyed by (``loading.model_identity``)."""
        if self._identity is None:
            shard = self.distributed.shard_name if self.distributed is not None else None
            identity = loading.model_identity(self.source.path, self.dtype, self.device, shard)
            self._identity = identity if self.kv is None else f"{identity}-{self.kv.tag}"  # one KV form per key
        return self._identity

    def kv_cached_bytes(self) -> int:
        return self.prompt_cache.nbytes

    def bound_kv_cache(self, room: Callable[[int], int]) -> None:
        self.prompt_cache.room = room

    def kv_token_bytes(self) -> int:
        """Bytes one token of context takes in this model's KV cache, every layer, in its form (0: unknown)."""
        dtype = compute_dtype(self.dtype, self.device) or str(self.config.get("torch_dtype") or "bfloat16")
        return token_bytes(self.config, dtype, self.kv) or 0

    @property
    def tokenizer(self) -> Any:
        """mlx-lm's ``TokenizerWrapper``, loaded on first use (no weights needed)."""
        if self._tokenizer is None:
            with self._tokenizer_lock:
                if self._tokenizer is None:
                    self._tokenizer = loading.load_tokenizer(self.source.path)
        return self._tokenizer

    @property
    def lltokenizer(self) -> Any:
        """llguidance's view of the tokenizer, built once (it takes about a second)."""
        if self._lltokenizer is None:
            from tinytitan.engine.grammar.mask import make_lltokenizer

            tw = self.tokenizer
            with self._tokenizer_lock:
                if self._lltokenizer is None:
                    self._lltokenizer = make_lltokenizer(tw)
        return self._lltokenizer

    @property
    def markers(self) -> Markers:
        tw = self.tokenizer
        return Markers(
            think_start=tw.think_start,
            think_end=tw.think_end,
            tool_start=tw.tool_call_start,
            tool_end=tw.tool_call_end,
        )

    @property
    def tool_parser(self) -> ToolParser:
        parse = wrap_parser(self.syntax, self.tokenizer.tool_parser)
        if parse is None:
            return json_tool_parser

        def parse_call(text: str, tools: Any) -> Any:
            ours = tuple(t for t in tools or () if isinstance(t, Tool))
            parsed = parse(text, template_tools(ours) or None)  # one call or a list (a section may hold several)
            return raw_inputs(self.syntax, text, parsed, {t.name for t in ours if t.custom})

        return parse_call

    @property
    def harmony(self) -> Any:
        """The harmony encoding (gpt-oss), loaded once."""
        if self._harmony is None:
            import tempfile
            from pathlib import Path

            from tinytitan.engine.output.harmony import load_encoding

            with self._tokenizer_lock:
                if self._harmony is None:
                    try:
                        cache = Path(tempfile.gettempdir()) / "tinytitan-o200k"
                        self._harmony = load_encoding(self.source.path, cache)
                    except RuntimeError as exc:
                        raise ModelUnavailable(str(exc)) from exc
        return self._harmony

    def output_parser(self, options: ParseOptions) -> EventParser:
        if self.syntax == HARMONY:
            from tinytitan.engine.output.harmony import HarmonyParser

            return HarmonyParser(self.harmony, options)
        return super().output_parser(options)

    # -- lifecycle --------------------------------------------------------------------------------
    def load(self) -> None:
        with self._load_lock:
            if self._model is not None:
                return
            _ = self.tokenizer
            # prompt chunks of a float32 CPU model: attention in NumPy, ~4× faster than mlx's; a
            # quantized KV cache's decode attention: its key heads split among the cores
            if cpu_attention.install_for(compute_dtype(self.dtype, self.device), self.device):
                cpu_kv_attention.install()
                cpu_share.start()  # … and the products' threads: the free cores of a busy machine
            if self.syntax == HARMONY:
                _ = self.harmony
            if self.distributed is not None:
                from tinytitan.engine.device.distributed.seam import load_shard

                self._model = load_shard(self, self.distributed)
                return
            if self.vision is not None:
                self._model = loading.load_vision(self.vision, self.dtype, self.device, self._info.id)
            else:
                self._model, _config = loading.load_weights(self.source.path, self.dtype, self.device, self._info.id)
            log.info("loaded %s from %s", self._info.id, self.source.path)
            if self.draft_source is not None:
                path = self.draft_source.path
                self._draft, _config = loading.load_weights(path, self.dtype, self.device, self.draft_source.model_id)
                log.info("loaded the draft model %s from %s", self.draft_source.model_id, path)

    def follow(self) -> int:
        """Ranks > 0 of a distributed group: load this rank's shard and replay rank 0's steps."""
        from tinytitan.engine.device.distributed.seam import cache_ops

        assert self.distributed is not None
        device_thread.claim()  # a follower replays on the thread that called this
        self.load()
        return self.distributed.follow(self._model, cache_ops(self))

    def unload(self, *, keep_prompt_cache: bool = False) -> bool:
        """Drop the weights (and, unless ``keep_prompt_cache``, the in-memory KV snapshots).

        Dropping the reference frees the weights at once: the model holds no reference cycles, so
        no ``gc.collect()`` is needed — it cost ~0.3 s of every model switch (measured). A rank of
        a distributed group keeps its shard for the life of the group.
        """
        if self.distributed is not None:
            return False
        with self._load_lock:
            was = self._model is not None
            self._model = self._draft = None
            batch, self.batch = self.batch, None
        if batch is not None:
            batch.close()  # it holds the model too
        self.prompt_cache.flush(timeout=60)  # the disk tier keeps this model's prefixes warm
        if not keep_prompt_cache:
            self.prompt_cache.clear(self.identity)
        if was:
            import mlx.core as mx

            mx.clear_cache()
        return was

    # -- rendering --------------------------------------------------------------------------------
    def count_text(self, text: str) -> int:
        """Tokens ``text`` takes in this model's tokenizer, no template (compaction measures notes)."""
        tokenizer = self.tokenizer  # loads it (under the lock) on first use
        with self._tokenizer_lock:
            return len(tokenizer.encode(text, add_special_tokens=False))

    def render(self, request: ValidatedRequest) -> Prompt:
        if self.distributed is not None:
            self.distributed.check()  # a lost group refuses before a stream opens
        if request.tool_choice in ("required", "function") and self.syntax is not None:
            from tinytitan.engine.models.grammar import check_forced

            check_forced(self.syntax, request)
        tw = self.tokenizer
        kwargs = thinking_kwargs(request.reasoning_level, self._info.reasoning_levels)
        tools = template_tools(request.tools) if self.syntax is not None else None
        messages = template_messages(request, self.template)
        if self.vision is not None:
            messages = self.vision.messages(request, messages)
        with self._tokenizer_lock:
            try:
                text = self._apply_template(messages, tools, kwargs)
            except TemplateError as exc:  # the model's own template refuses this conversation
                raise InvalidRequest(
                    f"this model's chat template cannot render the conversation: {exc}",
                    param=request.request.messages_param,
                    code="invalid_message",
                ) from exc
            if self.vision is None:
                tokens, vision = list(tw.encode(text, add_special_tokens=False)), None
            else:  # with its pictures' image tokens, and what the device needs for them
                tokens, vision = self.vision.tokens(
                    request, text, lambda s: list(tw.encode(s, add_special_tokens=False))
                )
        return Prompt(
            text=text,
            n_tokens=len(tokens),
            tokens=tokens,
            start_in_reasoning=ends_in_open_thought(text, tw.think_start),
            vision=vision,
        )

    def _apply_template(self, messages: list[dict[str, Any]], tools: Any, kwargs: dict[str, Any]) -> str:
        """The tokenizer's template (Hugging Face's immutable sandbox); one that appends to its own
        lists (Kimi K2) is rendered again in jinja's ordinary sandbox."""
        tw = self.tokenizer
        try:
            return str(
                tw.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False, **kwargs)
            )
        except TemplateError as exc:
            from tinytitan.engine.models.mlx.jinja_render import is_mutation_refusal, render_mutable

            if not is_mutation_refusal(exc) or getattr(tw, "_chat_template", None) is not None:
                raise
            specials = {k: v for k, v in tw.special_tokens_map.items() if isinstance(v, str)}
            thinking = {"enable_thinking": tw.has_thinking, **kwargs}
            context = {**specials, **thinking, "tools": tools, "add_generation_prompt": True}
            return render_mutable(self.template, messages, **context)

    # -- generation (the device thread) ---------------------------------------------------------
    def open_batch(self) -> Batch:
        """The batch every generation of this model goes through (rank 0 of a group: the lockstep)."""
        self.load()
        if self.distributed is not None:
            assert self.distributed.group.leader, "only rank 0 generates"
            if self.distributed.runner is None:  # the server is shutting down: the group was let go
                raise ShuttingDown()
            runner = self.distributed.runner
            runner.mask_for, runner.counted = self._row_mask, self._count
            return runner
        self.batch = MlxBatch(
            self._model,
            self.prompt_cache,
            self.identity,
            self.tokenizer.eos_token_ids,
            self.max_concurrent,
            mask_for=self._row_mask,
            device=self.device,
            counted=self._count,
            drafts=self.drafts,
            draft_model=self._draft,
            kv=self.kv,
        )
        self.drafts = self.batch.speculator is not None  # off where this mlx-lm lacks what drafts need
        self.kv = self.batch.kv  # … and full precision where it lacks what the quantized cache needs
        return self.batch

    def _count(self, n: int) -> None:
        self.tokens_generated += n

    def _row_mask(self, row: Row) -> Any:
        self.last_mask = mask = self._grammar_mask(row.request, row.prompt)
        return mask

    def decoder(self) -> Decoder:
        return Detokenizer(self.tokenizer.detokenizer)

    def _grammar_mask(self, request: ValidatedRequest, prompt: Prompt) -> Any:
        """The llguidance mask this generation needs (``models.grammar.mask_for``); None for free text."""
        free = request.output_format is None and request.tool_choice not in ("required", "function")
        if free and not any(t.custom for t in request.tools):
            return None  # the common case: nothing to mask, nothing to import
        from tinytitan.engine.models.grammar import mask_for

        newlines = "{function-name}\n<arg_key>" in self.template  # GLM-4.5 / 4.6 put each pair on a line
        return mask_for(request, prompt, self.lltokenizer, self.tokenizer, syntax=self.syntax, newlines=newlines)

    def close(self) -> None:
        """Let the disk tier finish writing (server shutdown, after the device worker stopped)."""
        if self.distributed is not None:
            self.distributed.shutdown()  # the followers exit with rank 0
        if not self.prompt_cache.flush(timeout=30):
            log.warning("the prompt cache was still writing to disk at shutdown; unfinished blocks are dropped")
