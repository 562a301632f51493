"""What a compaction pass asks for, and the pure text guards around its answer (reference §11).

The asks: the handover note (pass 1), a short plain retry, the compression of a note over its
budget. The guards: lines that echo the instruction or the ask are dropped; a repetition loop is a
failed pass. The fallbacks: the conversation as a ``[role] text`` transcript (for a conversation the
window no longer holds), and trimming that keeps the head third and the tail with a marker that
counts everything cut. No engine here: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest, Message, Part, Source
from tinytitan.engine.request.validate import IMAGE, message_text

__all__ = [
    "COMPRESS_ASK",
    "COMPRESS_INSTRUCTION",
    "HANDOVER_ASK",
    "HANDOVER_INSTRUCTION",
    "RETRY_ASK",
    "RETRY_INSTRUCTION",
    "TEXT_ONLY_IMAGE",
    "compaction_budget",
    "drop_echoed_lines",
    "is_repetition_loop",
    "keep_users_words",
    "render_transcript",
    "require_messages",
    "trim_middle",
    "without_images",
]

HANDOVER_INSTRUCTION = """\
The session so far is about to be compacted: write a handover note from which it can continue without the conversation.
Keep, under short headings, as terse bullet points:
- The user: who they are, what they said about themselves and their work (names, numbers, file names), in their words.
- Requirements: what the user asked for, with every constraint.
- Decisions: what was decided, the reason, and any option that was rejected.
- Facts: results, measurements and errors that were established.
- Next step: what remains to be done next.
Call the person "the user" and yourself "the assistant".
Quote file paths, commands and identifiers exactly as they appear.
Write only the note. Do not add anything that is not in the conversation."""
HANDOVER_ASK = "Write the handover note for the session above now."

RETRY_INSTRUCTION = "Summarize the conversation. Be brief and concrete."
RETRY_ASK = "Summarize the session above in a few plain sentences."

COMPRESS_INSTRUCTION = """\
Shorten the handover note you are given to at most {budget} tokens.
Keep requirements, decisions with their reasons, facts, paths and identifiers, and the next step.
Write only the shortened note."""
COMPRESS_ASK = "Rewrite the handover note above, shorter."

_BULLET = re.compile(r"^[\s\-*•#>\d.)]+")
_MIN_ECHO_CHARS = 8
USERS_WORDS = "The user's own words (the user said this, not the assistant):"
_TAGGED = re.compile(r"<([a-z_-]+)>.*?</\1>", re.DOTALL)  # <system-reminder>…, <environment_context>…
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")  # a dot inside a name (api.py, 2.4) ends nothing
_FACT = re.compile(
    r"(?:\b(?:I'm|I am|my name is|call me)\s+[A-Z][\w-]+)"  # who they are
    r"|(?:[\w.-]*/[\w./-]+)|(?:\b[\w-]+\.[a-z]{1,5}\b)"  # paths, file names
    r"|(?:\b\d[\d.,:]*\b)",  # numbers, versions, times
    re.IGNORECASE,
)
_MAX_QUOTE = 300  # characters: a longer sentence is data, not something said about oneself


def compaction_budget(context_window: int, requested: int | None, param: str = "max_compaction_tokens") -> int:
    """given → min(given, context/2); else min(4096, max(256, context/8)); ≤ 0 → 400."""
    if requested is not None:
        if requested <= 0:
            raise InvalidRequest(f"{param} must be greater than 0, got {requested}", param=param)
        return min(requested, context_window // 2)
    return min(4096, max(256, context_window // 8))


def require_messages(messages: Sequence[Message]) -> None:
    """A conversation with nothing but guidance has nothing to compact → 400."""
    if not any(m.role not in ("system", "developer") for m in messages):
        raise InvalidRequest("nothing to compact: input carries no messages", param="input")


def render_transcript(messages: Sequence[Message]) -> str:
    """``[role] text`` blocks, tool calls inline; the client's guidance left out (the client resends
    it), the server's own notes (earlier compactions) kept as ``[earlier summary]``.

    An image reads as its stated placeholder (``[image: …]``); any other non-text part is refused by
    the validator's own rule, naming the part where the client wrote it — never dropped."""
    blocks: list[str] = []
    names: dict[str, str] = {}
    for i, m in enumerate(messages):
        text = message_text(m, m.source or Source(f"input[{i}]")).strip()
        if m.role in ("system", "developer"):
            if m.server and text:
                blocks.append(f"[earlier summary] {text}")
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
    """Keep the head third and the tail, with a marker between that counts every character cut, in
    about ``max_chars`` characters. Trim the original, never a trimmed text again: a marker inside
    the cut would be lost, and the new one would count only the second cut."""
    if len(text) <= max_chars:
        return text
    max_chars = max(max_chars, 3)
    head = max_chars // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head].rstrip()}\n\n[… {omitted} characters omitted …]\n\n{text[-tail:].lstrip()}"


def _norm(line: str) -> str:
    return " ".join(_BULLET.sub("", line).lower().split())


def drop_echoed_lines(note: str, *said: str) -> str:
    """Guard 1: drop the note's lines that repeat a line of what the pass was told (instruction, ask)."""
    echoed = {_norm(line) for text in said for line in text.splitlines()}
    echoed = {line for line in echoed if len(line) >= _MIN_ECHO_CHARS}
    kept = [line for line in note.splitlines() if _norm(line) not in echoed]
    return "\n".join(kept).strip()


def keep_users_words(note: str, messages: Sequence[Message], room: int) -> str:
    """Guard 4: the note keeps what the user said about themselves and their work. Each sentence of
    the user's own messages that names something — who they are, a path or file, a number — and
    whose names the note lost is quoted after it, newest first within ``room`` characters (an
    introduction first of all). A small model drops exactly these; the next session needs them."""
    quotes: list[str] = []
    for message in messages:
        if message.role != "user" or message.server or not isinstance(message.content, str):
            continue
        for sentence in _SENTENCES.split(_TAGGED.sub(" ", message.content)):
            sentence = " ".join(sentence.split())
            facts = [m.group(0).split()[-1].rstrip(".,:;") for m in _FACT.finditer(sentence)]
            if facts and len(sentence) <= _MAX_QUOTE and any(f not in note for f in facts):
                quotes.append(sentence)
    introductions = [q for q in quotes if re.search(r"\b(I'm|I am|my name is|call me)\b", q, re.IGNORECASE)]
    kept: list[str] = []
    for quote in dict.fromkeys([*introductions, *reversed(quotes)]):
        if sum(len(k) + 3 for k in kept) + len(quote) > room:
            break
        kept.append(quote)
    if not kept:
        return note
    ordered = [q for q in dict.fromkeys(quotes) if q in kept]
    return note + "\n\n" + USERS_WORDS + "\n" + "\n".join(f"- {q}" for q in ordered)


def is_repetition_loop(note: str) -> bool:
    """Guard 2: ≥ 6 lines of ≥ 16 characters whose distinct count × 2 < their count."""
    lines = [line.strip() for line in note.splitlines() if len(line.strip()) >= 16]
    return len(lines) >= 6 and len(set(lines)) * 2 < len(lines)


TEXT_ONLY_IMAGE = "[an image the user sent, which this text-only model cannot see]"


def without_images(request: ChatRequest) -> ChatRequest:
    """``request`` with each image part a stated placeholder, for a text-only model's compaction
    (a vision model's passes keep the images: they are prepared like any request)."""
    messages: list[Message] = []
    for m in request.messages:
        if isinstance(m.content, tuple) and any(p.type == IMAGE for p in m.content):
            parts = tuple(Part("text", TEXT_ONLY_IMAGE, p.source) if p.type == IMAGE else p for p in m.content)
            m = replace(m, content=parts)
        messages.append(m)
    return replace(request, messages=tuple(messages))
