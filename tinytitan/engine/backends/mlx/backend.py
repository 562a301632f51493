"""The mlx backend: a real model through mlx-lm on the one generation path (issue #3).

Construction resolves the model (local directory or hub id) and reads its facts — config,
generation defaults, chat template, reasoning levels — without loading weights, so ``info`` is
cheap and a missing template or model is a startup error (``ModelUnavailable``). The tokenizer
loads on first use (rendering or counting needs no weights); the weights load in ``load()`` on the
engine's generation thread and ``unload()`` releases them (and the prompt cache).

Generation feeds ``mlx_lm.generate.generate_step`` the prompt tail the prompt cache does not
already hold, yields one raw ``Piece`` per generated token (end-of-turn tokens excluded) and checks
``cancel`` before every token (and between prefill chunks). The engine parses the pieces with the
markers and tool parser mlx-lm's ``TokenizerWrapper`` knows for the model family.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from tinytitan.engine.backends.base import Backend, Generation, Piece, Prompt
from tinytitan.engine.backends.mlx import loading
from tinytitan.engine.backends.mlx.resolve import (
    ModelSource,
    ModelUnavailable,
    context_window,
    read_json,
    resolve_model,
    sampling_defaults,
)
from tinytitan.engine.backends.mlx.sampling import make_processors, make_sampler
from tinytitan.engine.backends.mlx.syntax import FORCEABLE, HARMONY, tool_syntax, wrap_parser
from tinytitan.engine.backends.mlx.template import (
    ends_in_open_thought,
    read_levels,
    read_template,
    template_messages,
    template_tools,
    thinking_kwargs,
)
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.output_parser import Markers, OutputParser, ToolParser, json_tool_parser
from tinytitan.engine.prompt_cache import PromptCache
from tinytitan.engine.request import ModelInfo, Tool, ValidatedRequest

if TYPE_CHECKING:
    from tinytitan.engine.distributed import Distributed
    from tinytitan.engine.distributed.lockstep import CacheOps

__all__ = ["PREFILL_STEP", "MlxBackend"]

log = logging.getLogger("tinytitan.mlx")

PREFILL_STEP = 512  # prompt tokens per prefill chunk: cancellation is checked between chunks


class _Cancelled(Exception):
    """Raised from the prefill progress callback when the request was cancelled."""


class MlxBackend(Backend):
    def __init__(
        self,
        model: str | None,
        model_id: str | None = None,
        max_context: int | None = None,
        prompt_cache_entries: int = 4,
        prompt_cache_mib: int = 2048,
        dtype: str = "auto",
        distributed: Distributed | None = None,
    ) -> None:
        if dtype not in loading.DTYPES:
            choices = ", ".join(loading.DTYPES)
            raise ModelUnavailable(f"unknown dtype {dtype!r}; choose from {choices}")
        self.source: ModelSource = resolve_model(model, model_id)
        path = self.source.path
        self.config = read_json(path / "config.json")
        self.template = read_template(path)
        levels = read_levels(path, self.template)
        self.syntax = tool_syntax(path, self.template)
        if self.syntax is None:
            log.warning(
                "%s: no tool-call parser knows this chat template's syntax; serving it without tools "
                "(requests' tools are not shown to the model)",
                self.source.model_id,
            )
        self._info = ModelInfo(
            id=self.source.model_id,
            context_window=context_window(self.config, max_context),
            defaults=sampling_defaults(read_json(path / "generation_config.json")),
            reasoning_levels=levels.levels,
            default_reasoning=levels.default,
            forced_tool_calls=self.syntax in FORCEABLE,
        )
        self.dtype = dtype
        self.distributed = distributed  # serving as one rank of an mlx.distributed group (issue #19)
        self.prompt_cache = PromptCache(prompt_cache_entries, prompt_cache_mib * 2**20)
        self.tokens_generated = 0  # every token sampled, ever (tests watch it for cancellation)
        self._model: Any = None
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self._lltokenizer: Any = None
        self._harmony: Any = None
        self.last_mask: Any = None  # the grammar mask of the latest constrained generation (benchmarks)

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
            from tinytitan.engine.backends.mlx.constrain import make_lltokenizer

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
            openai_tools = template_tools(tuple(t for t in tools or () if isinstance(t, Tool))) or None
            return parse(text, openai_tools)  # one call or a list (a section may hold several)

        return parse_call

    @property
    def harmony(self) -> Any:
        """The harmony encoding (gpt-oss), loaded once."""
        if self._harmony is None:
            import tempfile
            from pathlib import Path

            from tinytitan.engine.harmony import load_encoding

            with self._tokenizer_lock:
                if self._harmony is None:
                    try:
                        cache = Path(tempfile.gettempdir()) / "tinytitan-o200k"
                        self._harmony = load_encoding(self.source.path, cache)
                    except RuntimeError as exc:
                        raise loading.ModelUnavailable(str(exc)) from exc
        return self._harmony

    def output_parser(self, **options: Any) -> OutputParser:
        if self.syntax == HARMONY:
            from tinytitan.engine.harmony import HarmonyParser

            return HarmonyParser(self.harmony, **options)  # type: ignore[return-value]
        return super().output_parser(**options)

    # -- lifecycle --------------------------------------------------------------------------------
    def load(self) -> None:
        if self._model is not None:
            return
        _ = self.tokenizer
        if self.syntax == HARMONY:
            _ = self.harmony
        if self.distributed is not None:
            self._load_shard(self.distributed)
            return
        self._model, _config = loading.load_weights(self.source.path, self.dtype)
        log.info("loaded %s from %s", self._info.id, self.source.path)

    def _load_shard(self, distributed: Distributed) -> None:
        """This rank's shard; on rank 0 the lockstep runner that drives every rank starts with it."""
        self._model = distributed.load(self.source.path, self.dtype)
        if distributed.group.leader:
            # built now, not at the first structured request: it holds the GIL for a second or more,
            # which would delay the runner's heartbeat
            _ = self.lltokenizer
            distributed.start_leader(
                self._model,
                self._cache_ops(),
                self.tokenizer.eos_token_ids,
                make_sampler=make_sampler,
                make_processors=make_processors,
                prefill_step=PREFILL_STEP,
            )

    def _cache_ops(self) -> CacheOps:
        from mlx_lm.models.cache import make_prompt_cache

        from tinytitan.engine.distributed.lockstep import CacheOps

        return CacheOps(
            fetch=self.prompt_cache.fetch, fresh=lambda: make_prompt_cache(self._model), remember=self._remember
        )

    def follow(self) -> int:
        """Ranks > 0 of a distributed group: load this rank's shard and replay rank 0's steps."""
        assert self.distributed is not None
        self.load()
        return self.distributed.follow(self._model, self._cache_ops())

    def unload(self) -> bool:
        if self.distributed is not None:
            return False  # every rank holds its shard for the life of the group
        was = self._model is not None
        self._model = None
        self.prompt_cache.clear()
        if was:
            import mlx.core as mx

            gc.collect()
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
            self.distributed.check()
        if request.tool_choice in ("required", "function") and self.syntax is not None:
            _check_forced(self.syntax, request)
        tw = self.tokenizer
        kwargs = thinking_kwargs(request.reasoning_level, self._info.reasoning_levels)
        tools = template_tools(request.tools) if self.syntax is not None else None
        messages = template_messages(request, self.template)
        with self._tokenizer_lock:
            try:
                text = self._apply_template(messages, tools, kwargs)
            except TemplateError as exc:  # the model's own template refuses this conversation
                raise InvalidRequest(
                    f"this model's chat template cannot render the conversation: {exc}",
                    param=request.request.messages_param,
                    code="invalid_message",
                ) from exc
            tokens = list(tw.encode(text, add_special_tokens=False))
        return Prompt(
            text=text,
            n_tokens=len(tokens),
            tokens=tokens,
            start_in_reasoning=ends_in_open_thought(text, tw.think_start),
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
            from tinytitan.engine.backends.mlx.jinja_render import is_mutation_refusal, render_mutable

            if not is_mutation_refusal(exc) or getattr(tw, "_chat_template", None) is not None:
                raise
            specials = {k: v for k, v in tw.special_tokens_map.items() if isinstance(v, str)}
            thinking = {"enable_thinking": tw.has_thinking, **kwargs}
            context = {**specials, **thinking, "tools": tools, "add_generation_prompt": True}
            return render_mutable(self.template, messages, **context)

    # -- generation -------------------------------------------------------------------------------
    def generate(self, gen: Generation) -> Iterator[Piece]:
        import mlx.core as mx
        from mlx_lm.generate import generate_step
        from mlx_lm.models.cache import make_prompt_cache

        request, prompt, cancel, max_new = gen.request, gen.prompt, gen.cancel, gen.max_new
        if cancel.is_set() or max_new <= 0:
            return
        self.load()
        if self.distributed is not None:
            yield from self._generate_lockstep(gen)
            return
        tokens: list[int] = list(prompt.tokens if prompt.tokens is not None else self.render(request).tokens)
        cache, reused = self.prompt_cache.fetch(tokens)
        if cache is None:
            cache, reused = make_prompt_cache(self._model), 0
        gen.cached_tokens = reused
        processors = make_processors(request.sampling, tokens, reused)
        self.last_mask = mask = self._grammar_mask(request, prompt)
        if mask is not None:
            processors.append(mask)  # last: penalties cannot re-open a masked token

        def progress(_done: int, _total: int) -> None:
            if cancel.is_set():
                raise _Cancelled

        steps = generate_step(
            mx.array(tokens[reused:]),
            self._model,
            max_tokens=max_new,
            sampler=make_sampler(request.sampling),
            logits_processors=processors,
            prompt_cache=cache,
            prefill_step_size=PREFILL_STEP,
            prompt_progress_callback=progress,
        )
        tw = self.tokenizer
        eos = tw.eos_token_ids
        detokenizer = tw.detokenizer
        generated: list[int] = []
        keep = True
        try:
            ended = False
            while not cancel.is_set():
                try:
                    token, _logprobs = next(steps)
                except StopIteration:
                    break
                generated.append(token)
                self.tokens_generated += 1
                if token in eos:
                    ended = True
                    break
                detokenizer.add_token(token)
                if len(generated) >= max_new:
                    detokenizer.finalize()
                yield Piece(detokenizer.last_segment)
            if ended or (not cancel.is_set() and len(generated) < max_new):
                detokenizer.finalize()
                if tail := detokenizer.last_segment:
                    yield Piece(tail, 0)
        except _Cancelled:
            pass
        except GeneratorExit:
            raise
        except BaseException:
            keep = False
            raise
        finally:
            steps.close()
            if keep:
                self._remember(tokens + generated, cache, reused)

    def _generate_lockstep(self, gen: Generation) -> Iterator[Piece]:
        """One generation on the distributed group's lockstep runner (rank 0)."""
        from tinytitan.engine.distributed.rows import END, Row

        assert self.distributed is not None and self.distributed.runner is not None
        request, prompt = gen.request, gen.prompt
        tokens: list[int] = list(prompt.tokens if prompt.tokens is not None else self.render(request).tokens)
        self.last_mask = mask = self._grammar_mask(request, prompt)

        def joined(reused: int) -> None:
            gen.cached_tokens = reused

        row = Row(tokens, gen.max_new, request.sampling, gen.cancel, mask=mask, on_join=joined)
        self.distributed.runner.submit(row)
        tw = self.tokenizer
        eos = set(tw.eos_token_ids)
        detokenizer = tw.detokenizer
        produced = 0
        try:
            while True:
                item = row.out.get()
                if item is END:
                    break
                if isinstance(item, BaseException):
                    raise item
                produced += 1
                self.tokens_generated += 1
                if item in eos:
                    break
                detokenizer.add_token(item)
                if produced >= gen.max_new:
                    detokenizer.finalize()
                yield Piece(detokenizer.last_segment)
            if not gen.cancel.is_set():
                detokenizer.finalize()
                if tail := detokenizer.last_segment:
                    yield Piece(tail, 0)
        finally:
            row.leave()

    def _grammar_mask(self, request: ValidatedRequest, prompt: Prompt) -> Any:
        """The llguidance mask for structured output or a forced tool call; None for free text."""
        if request.output_format is None and request.tool_choice not in ("required", "function"):
            return None
        from tinytitan.engine.backends.mlx.constrain import GrammarMask, grammar_for

        tw = self.tokenizer
        newlines = "{function-name}\n<arg_key>" in self.template  # GLM-4.5 / 4.6 put each pair on a line
        grammar = grammar_for(request, prompt, self.lltokenizer, tw, syntax=self.syntax, newlines=newlines)
        if grammar is None:
            return None
        return GrammarMask(self.lltokenizer, grammar, tw.eos_token_ids)

    def _remember(self, sequence: list[int], cache: list[Any], reused: int) -> None:
        """Store the KV state with the tokens it holds (generate_step feeds each token it yields)."""
        offset = getattr(cache[0], "offset", None) if cache else None
        if not isinstance(offset, int) or offset <= reused or offset > len(sequence):
            return
        self.prompt_cache.store(sequence[:offset], cache)


def _check_forced(syntax: str, request: ValidatedRequest) -> None:
    """A forced call whose schema this family's call syntax cannot promise is a 400 naming the tool."""
    from tinytitan.engine.call_grammar import forced_call_grammar
    from tinytitan.engine.grammar import lark_literal
    from tinytitan.engine.validate import tool_source

    for i, tool in enumerate(request.tools):
        if request.forced_tool is not None and tool.name != request.forced_tool:
            continue
        try:
            forced_call_grammar(syntax, [(tool.name, tool.parameters)], lark_literal)
        except ValueError as exc:
            raise InvalidRequest(
                f"a forced call cannot promise this schema in this model's call syntax: {exc}",
                param=tool_source(tool, i).at("parameters"),
                code="unsupported_value",
            ) from exc
