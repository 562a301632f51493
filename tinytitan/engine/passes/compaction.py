"""Compaction (reference §11): a conversation → one handover note, through the normal engine path.

Used by ``POST /v1/responses/compact``, Codex's ``compaction_trigger``, both APIs' server-side
compaction (``context_management``), ``tinytitan compact`` and the chat's ``/compact``. The
conversation is a ``ChatRequest`` — what the client sends for its next turn — and is read one of two
ways (``read``):

1. **as a continuation** (the normal way): the pass is that very request, rendered by the model's
   chat template into the same tokens, with the handover ask as one more user turn. The prompt
   cache holds the conversation from its last turn, so it serves everything but the last reply and
   the ask: compacting right after a turn costs about what one more short turn costs.
2. **as a transcript**, only when the conversation with room for the note no longer fits the window:
   ``[role] text`` blocks under the handover instruction, the middle trimmed away (the marker counts
   every character cut). The note says so: ``mode`` ``transcript``, ``read`` ``transcript``, a log line.

Every pass runs at temperature 0 with thinking off, as the server's own request (``internal``:
memory never decorates it; with memory on, the turns were decorated and the cache serves less).
Guards keep a bad pass out of the caller's history (``handover.py``): (1) lines echoing the
instruction or the ask are dropped; (2) a repetition loop is a failed pass — checked while the pass
generates, which stops the moment it loops; a failed (or empty) pass is retried once with a short
plain ask; (3) still unusable → ``extractive``: the transcript trimmed to budget × 3 characters;
(4) what the user said about themselves and their work — a sentence naming who they are, a path, a
number — that the note lost is quoted after it, within what the budget has left (not when the caller's
own ``instruction`` says what the note keeps).

A note over the budget (measured with the backend's own tokenizer) goes through a compression pass
(``compressed``); still over → the note itself is trimmed (``extractive``). ``tokens`` is what the
note holds; ``usage`` sums every pass, the discarded ones too (``discarded`` counts those).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tinytitan.engine.errors import ContextLengthExceeded, Unsupported
from tinytitan.engine.events import Finished, TextDelta, Usage
from tinytitan.engine.job import Job
from tinytitan.engine.output.cycles import CycleDetector
from tinytitan.engine.passes.handover import (
    COMPRESS_ASK,
    COMPRESS_INSTRUCTION,
    HANDOVER_ASK,
    HANDOVER_INSTRUCTION,
    RETRY_ASK,
    RETRY_INSTRUCTION,
    compaction_budget,
    drop_echoed_lines,
    is_repetition_loop,
    keep_users_words,
    render_transcript,
    require_messages,
    trim_middle,
    without_images,
)
from tinytitan.engine.passes.payload import PAYLOAD_VERSION, decode_payload, encode_payload, summary_preamble
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    ReasoningControls,
    Sampling,
    ToolChoice,
    new_request_id,
)
from tinytitan.engine.service import Engine

__all__ = [
    "COMPRESS_ASK",
    "HANDOVER_ASK",
    "HANDOVER_INSTRUCTION",
    "MODE_WORDS",
    "PAYLOAD_VERSION",
    "RETRY_ASK",
    "CompactionResult",
    "compact",
    "compaction_budget",
    "conversation",
    "decode_payload",
    "drop_echoed_lines",
    "encode_payload",
    "is_repetition_loop",
    "keep_users_words",
    "render_transcript",
    "require_messages",
    "summary_preamble",
    "trim_middle",
]

log = logging.getLogger("tinytitan.compaction")


# each mode in plain words (the CLI's and the chat's summaries)
MODE_WORDS = {
    "model": "written by the model",
    "compressed": "written by the model, then shortened by it",
    "extractive": "cut from the conversation itself (the model's notes did not fit)",
    "transcript": "written by the model from a trimmed transcript (the conversation no longer fit the window)",
}


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("s") else f"{n} {noun}s"


@dataclass(frozen=True, slots=True)
class CompactionResult:
    note: str
    mode: str  # model | transcript (the model's note, read one way or the other) | compressed | extractive
    tokens: int
    budget: int
    model: str
    usage: Usage  # every pass, the discarded ones too
    passes: int
    discarded: int = 0  # passes stopped as repetition loops
    read: str = "continuation"  # how the conversation was read: continuation | transcript
    first_token_s: float | None = None  # from the start to the first token of the note's first pass
    first_pass: Usage = field(default_factory=Usage)  # the first pass alone (its prompt, what the cache served)

    def payload(self, *, prunes: bool = False) -> str:
        return encode_payload(self.note, self.mode, self.model, read=self.read, prunes=prunes)


Progress = Callable[[str], None]


def conversation(model: str, messages: Sequence[Message], *, workspace: str | None = None) -> ChatRequest:
    """A bare conversation (no tools, no settings) as the request ``compact`` reads."""
    return ChatRequest(model=model, messages=tuple(messages), workspace=workspace)


def _as_pass(request: ChatRequest, cap: int) -> ChatRequest:
    """``request`` as the server's own greedy pass: what renders the prompt is left as it was."""
    choice = request.tool_choice
    if choice is not None and choice.mode not in ("auto", "none"):  # a forced call would be the answer
        choice = ToolChoice("auto", param=choice.param)
    return replace(
        request,
        tool_choice=choice,
        sampling=Sampling(temperature=0.0),
        stop=None,
        max_tokens=cap,
        reasoning=ReasoningControls(level="off"),  # a model that reasons inside its cap writes no note
        output_format=None,
        n=None,
        logprobs=None,
        top_logprobs=None,
        stream=False,
        include_usage=None,
        internal=True,
        request_id=new_request_id(),
    )


class _Compactor:
    def __init__(self, engine: Engine, conversation: ChatRequest, budget: int, progress: Progress | None) -> None:
        self.engine = engine
        self.conversation = conversation
        self.model = conversation.model
        self.window = engine.info_for(self.model).context_window
        self.budget = budget
        self.progress = progress or (lambda _msg: None)
        self.usage = Usage()
        self.first_pass: Usage | None = None
        self.passes = 0
        self.discarded = 0
        self.started = time.monotonic()
        self.first_token_s: float | None = None
        self._estimated = False

    async def count(self, text: str) -> int:
        try:
            return int(await self.engine.on_cpu(lambda: self.engine.backend_for(self.model).count_text(text)))
        except Unsupported:
            if not self._estimated:
                log.warning("compaction: the backend has no tokenizer; estimating 4 characters per token")
                self._estimated = True
            return len(text) // 4 + 1

    def cap(self) -> int:
        return max(16, min(self.budget * 2, self.window // 2))

    # -- the two readings ------------------------------------------------------------------------------
    async def continuation(self, said: str) -> Job | None:
        """The conversation with ``said`` as its next user turn, prepared; None when it no longer fits
        the window with room for a note of the budget."""
        messages = (*self.conversation.messages, Message("user", said, server=True))
        request = _as_pass(replace(self.conversation, messages=messages), self.cap())
        try:
            job = await self.engine.prepare(request)
        except ContextLengthExceeded:
            return None
        if job.generation.max_new < min(self.budget, self.cap()):
            job.close()
            return None
        return job

    async def standalone(self, instruction: str, body: str, ask: str) -> Job:
        """A fresh prompt: ``instruction`` as the system text, ``body`` and ``ask`` as the user turn;
        ``body`` (head third + tail) trimmed from the original until the note has room."""
        room = self.window - self.cap() - await self.count(instruction + ask) - 64
        room = max(room, self.window // 4)
        tokens = await self.count(body)
        chars = len(body)
        trimmed = body
        for _ in range(4):
            if tokens <= room:
                break
            chars = int(chars * room / tokens * 0.9)
            trimmed = trim_middle(body, chars)  # always the original: the marker counts the whole cut
            tokens = await self.count(trimmed)
        if trimmed is not body:
            log.info("compaction: the transcript was trimmed from %d to %d characters to fit", len(body), len(trimmed))
        messages = (Message("system", instruction, server=True), Message("user", f"{trimmed}\n\n{ask}"))
        request = ChatRequest(model=self.model, messages=messages, workspace=self.conversation.workspace)
        return await self.engine.prepare(_as_pass(request, self.cap()))

    # -- one pass --------------------------------------------------------------------------------------
    async def run(self, label: str, job: Job, *said: str) -> str | None:
        """One pass's note with guards 1 and 2; None when it failed (a loop, nothing usable)."""
        self.passes += 1
        self.progress(f"compaction pass {self.passes} ({label})…")
        parts: list[str] = []
        cycles = CycleDetector(repeats=2, min_span=400)  # a note never says 400 characters twice in a row
        async with contextlib.aclosing(job.events()) as events:  # leaving it closes the job
            async for event in events:
                if isinstance(event, Finished):
                    self._used(event.usage)
                elif isinstance(event, TextDelta):
                    if self.first_token_s is None and event.text:
                        self.first_token_s = time.monotonic() - self.started
                    for piece in _pieces(event.text):  # a delta that joined many steps, read as written
                        parts.append(piece)
                        looped = cycles.feed(piece) is not None
                        if looped or ("\n" in piece and is_repetition_loop("".join(parts))):
                            await self.stopped(job, "".join(parts))
                            return None
        note = drop_echoed_lines("".join(parts).strip(), *said)
        if is_repetition_loop(note):
            log.info("compaction: pass %d is a repetition loop; discarded", self.passes)
            self.discarded += 1
            return None
        return note or None

    def _used(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        if self.first_pass is None:
            self.first_pass = usage

    async def stopped(self, job: Job, text: str) -> None:
        """A looping pass, stopped: its work joins the usage (its tokens counted here), it is discarded."""
        self.discarded += 1
        written = await self.count(text)
        prompt = job.generation.prompt.n_tokens
        self._used(Usage(prompt_tokens=prompt, cached_tokens=job.generation.cached_tokens, completion_tokens=written))
        log.info("compaction: pass %d fell into a repetition loop; stopped after %d tokens", self.passes, written)
        self.progress(f"compaction pass {self.passes} was repeating itself: stopped after {written} tokens")

    async def trim_to_budget(self, note: str) -> tuple[str, int]:
        tokens = await self.count(note)
        chars = len(note)
        trimmed = note
        while tokens > self.budget and chars > 16:
            chars = int(chars * self.budget / tokens * 0.95)
            trimmed = trim_middle(note, chars)  # always the original: the marker counts the whole cut
            tokens = await self.count(trimmed)
        return trimmed, tokens

    # -- the whole compaction --------------------------------------------------------------------------
    async def note(self, instruction: str | None, as_transcript: bool) -> tuple[str | None, str]:
        """The model's note (None when both passes failed) and how the conversation was read."""
        said = (instruction,) if instruction else (HANDOVER_INSTRUCTION, HANDOVER_ASK)
        job = None if as_transcript else await self.continuation("\n\n".join(said))
        if job is not None:
            note = await self.run("handover", job, *said)
            if note is None and (job := await self.continuation(f"{RETRY_INSTRUCTION}\n\n{RETRY_ASK}")) is not None:
                note = await self.run("retry", job, RETRY_INSTRUCTION, RETRY_ASK)
            return note, "continuation"
        if not as_transcript:
            log.info("compaction: the conversation no longer fits the window with room for the note: a transcript")
            self.progress("the conversation no longer fits the context window: compacting a trimmed transcript")
        transcript = render_transcript(self.conversation.messages)
        system = instruction or HANDOVER_INSTRUCTION
        note = await self.run("handover", await self.standalone(system, transcript, HANDOVER_ASK), system, HANDOVER_ASK)
        if note is None:
            job = await self.standalone(RETRY_INSTRUCTION, transcript, RETRY_ASK)
            note = await self.run("retry", job, RETRY_INSTRUCTION, RETRY_ASK)
        return note, "transcript"


async def compact(
    engine: Engine,
    request: ChatRequest,
    *,
    max_tokens: int | None = None,
    instruction: str | None = None,
    progress: Progress | None = None,
    as_transcript: bool = False,
) -> CompactionResult:
    """Compact the conversation ``request`` holds into a handover note (reference §11).

    ``request`` is the conversation as the client sends it for a turn (model, guidance, tools,
    messages; its workspace is the caller's ``X-TinyTitan-Workspace``); ``instruction`` replaces the
    handover instruction and ask (Anthropic's ``compact_20260112`` ``instructions``); ``as_transcript``
    reads it as a transcript even when it fits (how every pass read it before issue 40: the
    benchmark's baseline)."""
    require_messages(request.messages)
    if not engine.info_for(request.model).vision:  # a text-only model reads a placeholder for each image
        request = without_images(request)
    budget = compaction_budget(engine.info_for(request.model).context_window, max_tokens)
    worker = _Compactor(engine, request, budget, progress)
    note, read = await worker.note(instruction, as_transcript)
    if note is None:
        mode = "extractive"
        note = trim_middle(render_transcript(request.messages), budget * 3)
        tokens = await worker.count(note)
    else:
        mode = "model" if read == "continuation" else "transcript"
        tokens = await worker.count(note)
        if tokens > budget:
            compress = COMPRESS_INSTRUCTION.format(budget=budget)
            shorter = await worker.run("compress", await worker.standalone(compress, note, COMPRESS_ASK), compress)
            shorter_tokens = await worker.count(shorter) if shorter else 0
            if shorter and shorter_tokens <= budget:
                note, tokens, mode = shorter, shorter_tokens, "compressed"
            else:
                note, tokens = await worker.trim_to_budget(shorter or note)
                mode = "extractive"
    room = min(budget, (budget - tokens) * 3)  # characters: what the budget has left, ~3 a token
    kept = keep_users_words(note, request.messages, room) if room > 0 and instruction is None else note
    if kept != note:
        note, tokens = kept, await worker.count(kept)
    model = engine.info_for(request.model).id
    first = worker.first_pass or Usage()
    log.info(
        "compaction: mode %s, read as a %s, %d tokens (budget %d, %s); the first pass read %d tokens, "
        "%d of them from the prompt cache",
        mode,
        read,
        tokens,
        budget,
        _plural(worker.passes, "pass"),
        first.prompt_tokens,
        first.cached_tokens,
    )
    written = worker.usage.completion_tokens
    discarded = f", {worker.discarded} discarded as loops" if worker.discarded else ""
    worker.progress(
        f"compaction done: a note of {tokens} tokens (budget {budget}), {MODE_WORDS.get(mode, mode)}; "
        f"{_plural(worker.passes, 'pass')} wrote {written} tokens{discarded}"
    )
    return CompactionResult(
        note,
        mode,
        tokens,
        budget,
        model,
        worker.usage,
        worker.passes,
        worker.discarded,
        read=read,
        first_token_s=worker.first_token_s,
        first_pass=first,
    )


def _pieces(text: str, most: int = 256) -> list[str]:
    """``text`` in the pieces a reader that kept up would have seen it in — lines, none longer than
    ``most`` characters — so a loop is caught (and counted) where it began, however many steps one
    delta joined (``engine/inbox.py`` joins the text of steps a lagging reader reads at once)."""
    return [line[i : i + most] for line in text.splitlines(keepends=True) for i in range(0, len(line), most)]
