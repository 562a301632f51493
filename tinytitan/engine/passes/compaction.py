"""Compaction (reference §11): a conversation → one handover note, through the normal engine path.

Used by ``POST /v1/responses/compact`` and by ``tinytitan compact``. The conversation (protocol-neutral
``Message``s) is rendered as a ``[role] text`` transcript and summarised under a handover instruction
at temperature 0 with thinking off, through ``Engine.complete`` (so the same queue). Guards keep a bad
pass out of the caller's history:

1. note lines that echo instruction lines are dropped;
2. a repetition loop (≥ 6 lines of ≥ 16 chars whose distinct count × 2 < count, or a verbatim
   cycle: 400 characters or more said twice in a row, ``tinytitan.engine.output.cycles``) is a failed
   pass — checked while the pass generates, which stops the moment it loops; a failed (or empty)
   pass is retried once with a short plain instruction;
3. still unusable → ``extractive``: the transcript trimmed to budget × 3 characters.

A note over the budget (measured with the backend's own tokenizer) goes through a compression pass
(``compressed``); still over → the note itself is trimmed (``extractive``). ``tokens`` is what the
note holds; ``usage`` sums every pass, the discarded ones too (``discarded`` counts those). The note travels in a
versioned payload: base64 of compact sorted-key JSON ``{createdAt, mode, model, summary, v}``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tinytitan.engine.errors import InvalidRequest, Unsupported
from tinytitan.engine.events import Finished, TextDelta, Usage
from tinytitan.engine.output.cycles import CycleDetector
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling, Source
from tinytitan.engine.request.validate import message_text
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
    "decode_payload",
    "drop_echoed_lines",
    "encode_payload",
    "is_repetition_loop",
    "render_transcript",
    "require_messages",
    "summary_preamble",
    "trim_middle",
]

log = logging.getLogger("tinytitan.compaction")

PAYLOAD_VERSION = 1

HANDOVER_INSTRUCTION = """\
You are writing a handover note so that another assistant can continue this session without the transcript.
Keep, under short headings, as terse bullet points:
- Requirements: what the user asked for, with every constraint.
- Decisions: what was decided, the reason, and any option that was rejected.
- Facts: results, measurements and errors that were established.
- Next step: what remains to be done next.
Quote file paths, commands and identifiers exactly as they appear.
Write only the note. Do not add anything that is not in the transcript."""
HANDOVER_ASK = "Write the handover note for the session above now."

RETRY_INSTRUCTION = "Summarize the conversation you are given. Be brief and concrete."
RETRY_ASK = "Summarize the session above in a few plain sentences."

COMPRESS_INSTRUCTION = """\
Shorten the handover note you are given to at most {budget} tokens.
Keep requirements, decisions with their reasons, facts, paths and identifiers, and the next step.
Write only the shortened note."""
COMPRESS_ASK = "Rewrite the handover note above, shorter."

_BULLET = re.compile(r"^[\s\-*•#>\d.)]+")
_MIN_ECHO_CHARS = 8


# -- the payload ------------------------------------------------------------------------------------


def encode_payload(summary: str, mode: str, model: str, created_at: int | None = None) -> str:
    body = {
        "createdAt": int(time.time()) if created_at is None else created_at,
        "mode": mode,
        "model": model,
        "summary": summary,
        "v": PAYLOAD_VERSION,
    }
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(raw.encode("utf-8")).decode("ascii")


def decode_payload(content: object, param: str = "encrypted_content") -> dict[str, object]:
    """The payload of a compaction item; refuses missing, unreadable and other-version payloads by name."""
    if not isinstance(content, str) or not content:
        raise InvalidRequest("a compaction item needs its encrypted_content", param=param, code="invalid_value")
    try:
        body = json.loads(base64.b64decode(content.encode("ascii"), validate=True).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise InvalidRequest(
            "compaction payload is unreadable: it was not produced by this server",
            param=param,
            code="compaction_payload_invalid",
        ) from exc
    if not isinstance(body, dict) or not isinstance(body.get("summary"), str):
        raise InvalidRequest(
            "compaction payload is unreadable: it carries no summary",
            param=param,
            code="compaction_payload_invalid",
        )
    if body.get("v") != PAYLOAD_VERSION:
        raise InvalidRequest(
            f"compaction payload version {body.get('v')!r} is not supported (this server reads v{PAYLOAD_VERSION})",
            param=param,
            code="compaction_payload_version",
        )
    return body


def summary_preamble(summary: str) -> str:
    """How a decoded note joins the system block."""
    return (
        "This session continues an earlier one that was compacted. The summary of the earlier session, "
        "to continue from:\n\n" + summary.strip()
    )


# -- arithmetic and text --------------------------------------------------------------------------------


def compaction_budget(context_window: int, requested: int | None, param: str = "max_compaction_tokens") -> int:
    """given → min(given, context/2); else min(4096, max(256, context/8)); ≤ 0 → 400."""
    if requested is not None:
        if requested <= 0:
            raise InvalidRequest(f"{param} must be greater than 0, got {requested}", param=param)
        return min(requested, context_window // 2)
    return min(4096, max(256, context_window // 8))


def render_transcript(messages: Sequence[Message], notes: Sequence[str] = ()) -> str:
    """``[role] text`` blocks, tool calls inline; system guidance left out (the client resends it).

    A non-text part (a Chat ``image_url``, a Messages ``image``) is refused by the validator's own
    rule, naming the part where the client wrote it — never dropped from the transcript."""
    blocks = [f"[earlier summary] {note.strip()}" for note in notes if note.strip()]
    names: dict[str, str] = {}
    for i, m in enumerate(messages):
        text = message_text(m, m.source or Source(f"input[{i}]")).strip()
        if m.role in ("system", "developer"):
            continue
        if m.role == "tool":
            name = names.get(m.tool_call_id or "", "")
            blocks.append(f"[tool result{' ' + name if name else ''}] {text}")
            continue
        lines = [f"[{m.role}] {text}".rstrip()] if text or not m.tool_calls else []
        for call in m.tool_calls:
            name = f"{call.namespace}.{call.name}" if call.namespace else call.name
            names[call.id] = name
            lines.append(f"[{m.role} tool call] {name} {call.arguments}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def trim_middle(text: str, max_chars: int) -> str:
    """Keep the head third and the tail, with a marker between, in about ``max_chars`` characters."""
    if len(text) <= max_chars:
        return text
    max_chars = max(max_chars, 3)
    head = max_chars // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head].rstrip()}\n\n[… {omitted} characters omitted …]\n\n{text[-tail:].lstrip()}"


def _norm(line: str) -> str:
    return " ".join(_BULLET.sub("", line).lower().split())


def drop_echoed_lines(note: str, instruction: str) -> str:
    """Guard 1: drop the note's lines that repeat a line of the instruction."""
    echoed = {_norm(line) for line in instruction.splitlines()}
    echoed = {line for line in echoed if len(line) >= _MIN_ECHO_CHARS}
    kept = [line for line in note.splitlines() if _norm(line) not in echoed]
    return "\n".join(kept).strip()


def is_repetition_loop(note: str) -> bool:
    """Guard 2: ≥ 6 lines of ≥ 16 characters whose distinct count × 2 < their count."""
    lines = [line.strip() for line in note.splitlines() if len(line.strip()) >= 16]
    return len(lines) >= 6 and len(set(lines)) * 2 < len(lines)


# -- the algorithm ----------------------------------------------------------------------------------


# each mode in plain words (the CLI's and the chat's summaries)
MODE_WORDS = {
    "model": "written by the model",
    "compressed": "written by the model, then shortened by it",
    "extractive": "cut from the conversation itself (the model's notes did not fit)",
}


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("s") else f"{n} {noun}s"


@dataclass(frozen=True, slots=True)
class CompactionResult:
    note: str
    mode: str  # model | compressed | extractive
    tokens: int
    budget: int
    model: str
    usage: Usage  # every pass, the discarded ones too
    passes: int
    discarded: int = 0  # passes stopped as repetition loops

    def payload(self) -> str:
        return encode_payload(self.note, self.mode, self.model)


Progress = Callable[[str], None]


class _Compactor:
    def __init__(
        self, engine: Engine, model: str, budget: int, progress: Progress | None, workspace: str | None
    ) -> None:
        self.engine = engine
        self.model = model
        self.workspace = workspace
        self.budget = budget
        self.progress = progress or (lambda _msg: None)
        self.usage = Usage()
        self.passes = 0
        self.discarded = 0
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
        return max(16, min(self.budget * 2, self.engine.info_for(self.model).context_window // 2))

    async def fit(self, body: str, instruction: str) -> str:
        """Trim the pass's input (head third + tail) until it leaves room for the note."""
        room = self.engine.info_for(self.model).context_window - self.cap() - await self.count(instruction) - 64
        room = max(room, self.engine.info_for(self.model).context_window // 4)
        for _ in range(4):
            tokens = await self.count(body)
            if tokens <= room:
                break
            body = trim_middle(body, int(len(body) * room / tokens * 0.9))
        return body

    async def run_pass(self, label: str, instruction: str, body: str, ask: str) -> str | None:
        """One pass's text; None when it fell into a loop (stopped then, not at its cap)."""
        self.passes += 1
        self.progress(f"compaction pass {self.passes} ({label})…")
        body = await self.fit(body, instruction)
        request = ChatRequest(
            model=self.model,
            messages=(Message("system", instruction, server=True), Message("user", f"{body}\n\n{ask}")),
            sampling=Sampling(temperature=0.0),
            max_tokens=self.cap(),
            reasoning=ReasoningControls(level="off"),
            workspace=self.workspace,
            internal=True,
        )
        job = await self.engine.prepare(request)
        parts: list[str] = []
        cycles = CycleDetector(repeats=2, min_span=400)  # a note never says 400 characters twice in a row
        async with contextlib.aclosing(job.events()) as events:  # leaving it closes the job
            async for event in events:
                if isinstance(event, Finished):
                    self.usage = self.usage + event.usage
                elif isinstance(event, TextDelta):
                    parts.append(event.text)
                    looped = cycles.feed(event.text) is not None
                    if looped or ("\n" in event.text and is_repetition_loop("".join(parts))):
                        await self.stopped(request, "".join(parts))
                        return None
        return "".join(parts).strip()

    async def stopped(self, request: ChatRequest, text: str) -> None:
        """A looping pass, stopped: its work joins the usage (its tokens counted here), it is discarded."""
        self.discarded += 1
        try:
            prompt = await self.engine.count_tokens(request)
        except Unsupported:
            prompt = 0
        written = await self.count(text)
        self.usage = self.usage + Usage(prompt_tokens=prompt, completion_tokens=written)
        log.info("compaction: pass %d fell into a repetition loop; stopped after %d tokens", self.passes, written)
        self.progress(f"compaction pass {self.passes} was repeating itself: stopped after {written} tokens")
        return None

    async def usable(self, label: str, instruction: str, body: str, ask: str) -> str | None:
        """One pass with guards 1 and 2; ``None`` when the pass failed."""
        text = await self.run_pass(label, instruction, body, ask)
        note = drop_echoed_lines(text, instruction) if text is not None else None
        if note is not None and is_repetition_loop(note):
            log.info("compaction: pass %d is a repetition loop; discarded", self.passes)
            self.discarded += 1
            return None
        return note or None

    async def trim_to_budget(self, note: str) -> tuple[str, int]:
        tokens = await self.count(note)
        chars = len(note)
        while tokens > self.budget and chars > 16:
            chars = int(chars * self.budget / tokens * 0.95)
            note = trim_middle(note, chars)
            tokens = await self.count(note)
        return note, tokens


def require_messages(messages: Sequence[Message]) -> None:
    """A conversation with nothing but guidance has nothing to compact → 400."""
    if not any(m.role not in ("system", "developer") for m in messages):
        raise InvalidRequest("nothing to compact: input carries no messages", param="input")


async def compact(
    engine: Engine,
    model: str,
    messages: Sequence[Message],
    *,
    notes: Sequence[str] = (),
    max_tokens: int | None = None,
    progress: Progress | None = None,
    workspace: str | None = None,
) -> CompactionResult:
    """Compact a conversation into a handover note (reference §11).

    Every pass is the server's own request (``internal``): memory never decorates it, whatever
    workspace it runs for (``workspace``: the caller's ``X-TinyTitan-Workspace``)."""
    require_messages(messages)
    budget = compaction_budget(engine.info_for(model).context_window, max_tokens)
    transcript = render_transcript(messages, notes)
    worker = _Compactor(engine, model, budget, progress, workspace)

    note = await worker.usable("handover", HANDOVER_INSTRUCTION, transcript, HANDOVER_ASK)
    if note is None:
        note = await worker.usable("retry", RETRY_INSTRUCTION, transcript, RETRY_ASK)
    if note is None:
        mode = "extractive"
        note = trim_middle(transcript, budget * 3)
        tokens = await worker.count(note)
    else:
        mode = "model"
        tokens = await worker.count(note)
        if tokens > budget:
            instruction = COMPRESS_INSTRUCTION.format(budget=budget)
            shorter = await worker.usable("compress", instruction, note, COMPRESS_ASK)
            shorter_tokens = await worker.count(shorter) if shorter else 0
            if shorter and shorter_tokens <= budget:
                note, tokens, mode = shorter, shorter_tokens, "compressed"
            else:
                note, tokens = await worker.trim_to_budget(shorter or note)
                mode = "extractive"
    info_model = engine.info_for(model).id
    log.info("compaction: mode %s, %d tokens (budget %d, %s)", mode, tokens, budget, _plural(worker.passes, "pass"))
    written = worker.usage.completion_tokens
    discarded = f", {worker.discarded} discarded as loops" if worker.discarded else ""
    worker.progress(
        f"compaction done: a note of {tokens} tokens (budget {budget}), {MODE_WORDS.get(mode, mode)}; "
        f"{_plural(worker.passes, 'pass')} wrote {written} tokens{discarded}"
    )
    return CompactionResult(note, mode, tokens, budget, info_model, worker.usage, worker.passes, worker.discarded)
