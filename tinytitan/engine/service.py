"""The Engine facade: the ONE generation path every protocol and the CLI go through.

    ChatRequest ─► route model ─► validate ─► render + count ─► admit (queue) ─► Job
    Job.events(): wait for a slot ─► a row on the device worker ─► tokens per step ─► decode +
                  OutputParser (on the event loop) ─► Events

The models come from a ``ModelManager``: one model, or a catalog whose requests may name any
install. Routing, validation and rendering use the named model's own facts and tokenizer without
loading it; the device worker (the one thread that calls MLX) switches the resident model only when
a row's turn comes, so requests keep their FIFO order across models.

Validation, rendering and admission all happen in ``prepare`` — before a protocol opens a stream —
so every refusal (including a full queue) is an ordinary HTTP error. ``Job.events()`` then yields
``ReasoningDelta`` / ``TextDelta`` / ``ToolCall`` and one ``Finished``. Closing the iterator (a
client that went away) cancels the generation within a token and frees the slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from tinytitan.engine.cpu_pool import CpuPool
from tinytitan.engine.device.worker import DeviceWorker
from tinytitan.engine.errors import ContextLengthExceeded, ShuttingDown, TinyTitanError, Unsupported
from tinytitan.engine.job import Completion, Job
from tinytitan.engine.kv.budget import KvBudget
from tinytitan.engine.models.base import Backend, Prompt
from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.queue import AdmissionQueue
from tinytitan.engine.readiness import Readiness, listen
from tinytitan.engine.request import ChatRequest, ModelInfo, ValidatedRequest
from tinytitan.engine.request.defaults import with_flags
from tinytitan.engine.request.image_check import ImageLimits
from tinytitan.engine.request.image_load import has_images, load_images
from tinytitan.engine.request.limits import output_budget
from tinytitan.engine.request.router import StripRules, resolve_model, strip_cli
from tinytitan.engine.request.validate import validate
from tinytitan.engine.tool_search.rounds import SearchRounds, runs_searches

if TYPE_CHECKING:
    from tinytitan.engine.memory.decorator import MemoryDecorator

__all__ = ["Engine"]

log = logging.getLogger("tinytitan.engine")

T = TypeVar("T")


class Engine:
    def __init__(
        self,
        models: Backend | ModelManager,
        *,
        queue_limit: int = 4,
        default_reasoning: str | None = None,
        strip: StripRules | None = None,
        max_concurrent: int | None = None,
        memory: MemoryDecorator | None = None,
        sampling_defaults: Mapping[str, float] | None = None,
        kv_budget: KvBudget | None = None,
        images: ImageLimits | None = None,
    ) -> None:
        self.models = models if isinstance(models, ModelManager) else ModelManager.single(models)
        # generations running at once (the mlx backend decodes them in one batch); the rest queue
        own = 1 if isinstance(models, ModelManager) else getattr(models, "max_concurrent", 1)
        self.max_concurrent = max(1, max_concurrent or own)
        self.kv_budget = kv_budget  # the KV memory of every row and the prompt caches (--max-kv-memory)
        if kv_budget is not None:
            kv_budget.cached = lambda: sum(b.kv_cached_bytes() for b in self.models.built())
            for backend in self.models.built():
                backend.bound_kv_cache(kv_budget.room)
            self.models.on_build = lambda backend: backend.bound_kv_cache(kv_budget.room)
        self.queue = AdmissionQueue(limit=queue_limit, slots=self.max_concurrent, budget=kv_budget)
        self.default_reasoning = default_reasoning
        self.sampling_defaults = dict(sampling_defaults or {})  # serve's --temperature …: over the model's
        self.strip = strip or StripRules()
        self.memory = memory  # the memory decorator, when memory is on
        self.readiness = Readiness()  # loading → ready | failed: the first model's weights (warm_up)
        self.jobs: set[Job] = set()  # admitted and not yet closed (ended at shutdown)
        self.device = DeviceWorker(self.models.backend, log_loads=self.models.catalog)
        self.models.worker = self.device
        self.cpu = CpuPool()  # rendering and counting: CPU work off the event loop, no MLX
        self.images = images or ImageLimits()  # what a request's images may be (serve's image flags)

    # -- model names and facts (never load weights) ---------------------------------------------
    @property
    def backend(self) -> Backend:
        """The default model's backend: the one model; in a catalog the resident one, else the first."""
        return self.models.backend(self.models.default_id)

    @property
    def info(self) -> ModelInfo:
        """The default model's facts (what a caller that names no model means)."""
        return self._info(self.models.default_id)

    def _info(self, model_id: str) -> ModelInfo:
        info = self.models.info(model_id)
        if self.default_reasoning is not None:
            info = replace(info, default_reasoning=self.default_reasoning)
        return with_flags(info, self.sampling_defaults)

    def route(self, name: str) -> tuple[str, bool]:
        """The served id ``name`` means and whether the CLI strip applies; ``UnknownModel`` otherwise."""
        return resolve_model(name, self.models.ids(), self.strip)

    def info_for(self, name: str) -> ModelInfo:
        return self._info(self.route(name)[0])

    def backend_for(self, name: str) -> Backend:
        """The backend serving ``name`` (built from its facts on first need; no weights loaded)."""
        return self.models.backend(self.route(name)[0])

    async def model_backend(self, model_id: str) -> Backend:
        """``models.backend(model_id)``, built off the event loop when it still has files to read."""
        built = self.models.peek(model_id)
        return built if built is not None else await self.on_cpu(self.models.backend, model_id)

    def context_window(self, name: str | None) -> int:
        """The named model's context window; the default model's for a missing or unknown name (the
        request is refused by name later, where the protocol checks it)."""
        if isinstance(name, str) and self.accepts(name):
            return self.info_for(name).context_window
        return self.info.context_window

    def model_ids(self) -> list[str]:
        return self.models.ids()

    def accepts(self, name: str) -> bool:
        try:
            self.route(name)
        except TinyTitanError:
            return False
        return True

    # -- the path -------------------------------------------------------------------------------
    async def validate(self, request: ChatRequest) -> tuple[ValidatedRequest, Prompt]:
        """Route, validate, render and count: every refusal that needs no slot."""
        validated = self._validated(await self._with_images(request))
        return validated, await self._fitting(validated)

    async def _with_images(self, request: ChatRequest) -> ChatRequest:
        """``request`` with its images checked (off the event loop) for a model that takes images; a
        text-only model's validator refuses them by name without reading a byte."""
        if not has_images(request) or not self.accepts(request.model) or not self.info_for(request.model).vision:
            return request
        return await load_images(request, self.images, self.on_cpu)

    def _validated(self, request: ChatRequest) -> ValidatedRequest:
        model_id, strip = self.route(request.model)
        if strip:
            request = strip_cli(request, self.strip)
        return validate(request, self._info(model_id), strip_cli=strip)

    async def _fitting(self, validated: ValidatedRequest) -> Prompt:
        """The rendered prompt; refused when it leaves no room in the context window."""
        backend = await self.model_backend(validated.model_id)
        prompt = await self.on_cpu(backend.render, validated)
        window = self.models.info(validated.model_id).context_window
        if prompt.n_tokens >= window:
            raise ContextLengthExceeded(
                f"the prompt has {prompt.n_tokens} tokens; the context window is {window}",
                tokens=prompt.n_tokens,
                limit=window,
                param=validated.request.messages_param,
            )
        return prompt

    async def prepare(self, request: ChatRequest) -> Job:
        request = await self._with_images(request)
        validated = self._validated(request)
        searching = runs_searches(validated)  # a tool search the server runs: its rounds, without memory's
        if self.memory is not None and not request.internal and not searching:
            job = await self._prepare_with_memory(validated)
            if job is not None:
                return job
        prompt = await self._fitting(validated)
        window, per_token = self._room(validated, prompt)
        max_new = output_budget(validated.cap, window, prompt.n_tokens)
        ticket = self.queue.admit(per_token * (prompt.n_tokens + max(0, max_new)))
        rounds = None
        if searching:
            backend = await self.model_backend(validated.model_id)
            rounds = SearchRounds(render=lambda r: self.on_cpu(backend.render, r), window=window, blocking=self.on_cpu)
        return Job(self, validated, prompt, max_new, ticket, rounds)

    def _room(self, validated: ValidatedRequest, prompt: Prompt) -> tuple[int, int]:
        """The context a row may fill — the model's window, or less where the KV memory budget holds
        fewer of its tokens (the output budget is capped by it as by the window) — and the bytes a
        token takes (0: no budget). A prompt the budget cannot hold, even alone, is the context error."""
        window = self.models.info(validated.model_id).context_window
        budget = self.kv_budget
        per_token = self.models.backend(validated.model_id).kv_token_bytes() if budget is not None else 0
        if budget is None or per_token <= 0:
            return window, 0
        holds = budget.limit // per_token
        if prompt.n_tokens >= holds:
            raise ContextLengthExceeded(
                budget.refusal(prompt.n_tokens, per_token), param=validated.request.messages_param
            )
        return min(window, holds), per_token

    async def _prepare_with_memory(self, validated: ValidatedRequest) -> Job | None:
        """The memory decorator's job, or None to run the request as the client sent it (no usable
        workspace, or a prompt that fits only without the memory instructions)."""
        from tinytitan.engine.memory.loop import MemoryRounds

        assert self.memory is not None
        plan = await self.memory.plan(validated)
        if plan is None:
            return None
        backend = await self.model_backend(validated.model_id)
        prompt = await self.on_cpu(backend.render, plan.request)
        try:
            window, per_token = self._room(validated, prompt)
        except ContextLengthExceeded:
            window, per_token = 0, 0  # the memory block leaves no room: served without it (refused there if so)
        max_new = output_budget(validated.cap, window, prompt.n_tokens)
        if max_new <= 0:
            log.info("request %s: no room for memory in the context window; served without it", validated.request_id)
            return None
        rounds = MemoryRounds(
            plan, render=lambda r: self.on_cpu(backend.render, r), window=window, blocking=self.on_cpu
        )
        ticket = self.queue.admit(per_token * (prompt.n_tokens + max_new))
        return Job(self, plan.request, prompt, max_new, ticket, rounds)

    async def on_cpu(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the engine's CPU pool (never the device thread, never a new thread)."""
        return await asyncio.wrap_future(self.cpu.submit(fn, *args))

    async def prompt_tokens(self, request: ChatRequest) -> int:
        """The rendered prompt's tokens, whether or not the window holds them (a server-side
        compaction's trigger reads it: a prompt past the window is one to compact, not to refuse)."""
        validated = self._validated(await self._with_images(request))
        backend = await self.model_backend(validated.model_id)
        return (await self.on_cpu(backend.render, validated)).n_tokens

    async def count_tokens(self, request: ChatRequest) -> int:
        if not (await self.model_backend(self.route(request.model)[0])).has_tokenizer:
            raise Unsupported("this backend has no tokenizer")
        _validated, prompt = await self.validate(request)
        return prompt.n_tokens

    async def complete(self, request: ChatRequest) -> Completion:
        job = await self.prepare(request)
        return await job.collect()

    async def unload(self) -> bool:
        """Wait for in-flight generations, then release the resident model (weights and snapshots)."""
        await self.queue.wait_idle()
        return bool(await asyncio.wrap_future(self.device.unload()))

    def warm_up(self) -> Future[Any] | None:
        """Start loading the model to serve first on the device worker; requests queue behind it.

        One model: that one. A catalog: the one ``--model`` named, else nothing until a request names one.
        ``readiness`` turns ``ready`` when its weights are in (at once when there is nothing to load),
        or ``failed`` with the reason; it notes the loading code's progress lines meanwhile.
        """
        first = self.models.preferred
        if first is None or self.models.backend(first).loaded:
            self.readiness.ready()
            return None
        listening = contextlib.ExitStack()
        listening.enter_context(listen(self.readiness.note))  # the loading code's progress lines

        def report(future: Future[Any]) -> None:  # on the device thread
            listening.close()
            error = None if future.cancelled() else future.exception()
            if future.cancelled():
                self.readiness.fail("the server stopped before the model was loaded")
            elif error is None:
                self.readiness.ready()
            else:
                log.debug("loading the model failed: %r", error)  # readiness carries it: serve prints it
                self.readiness.fail(error.message if isinstance(error, TinyTitanError) else str(error))

        loading = self.device.activate(first)
        loading.add_done_callback(report)
        return loading

    def stop(self, finish_within: float) -> None:
        """The server begins to shut down (call on its event loop): waiting and new requests fail
        now with ``ShuttingDown``; running ones may finish for ``finish_within`` seconds, then end
        with it too — their streams close well-formed instead of being cut when the server gives up.
        """
        self.queue.close(ShuttingDown)
        if self.jobs:
            asyncio.get_running_loop().call_later(finish_within, self._end_running)

    def _end_running(self) -> None:
        for job in list(self.jobs):
            job.abort(ShuttingDown())

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the device worker (a running step finishes; rows still there end with
        ``ShuttingDown``), then let every built model finish its background work."""
        self.device.close()
        self.device.join(timeout)
        for backend in self.models.built():  # every model a catalog has built, not only the default
            backend.close()
        self.cpu.shutdown(wait=False, cancel_futures=True)
        if self.memory is not None:
            self.memory.close()  # releases every workspace's journal lock

    def join(self, timeout: float | None = None) -> bool:
        """After ``shutdown``: wait for the device thread to finish; True when it has.

        A process must not finalize while that thread runs inside MLX: CPython ends such a thread
        with a forced unwind when it next takes the GIL, and unwinding through MLX's C++ frames
        aborts the process ("terminate called without an active exception"). Rows are dropped
        within a step (a prefill chunk at most); only a model load cannot be interrupted.
        """
        return self.device.join(timeout)
