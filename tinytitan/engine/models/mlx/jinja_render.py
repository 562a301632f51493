"""Rendering a chat template that mutates its own lists (issue #18).

Hugging Face renders chat templates in jinja's *immutable* sandbox, which refuses ``list.append``.
Some real templates need it: Kimi K2's queues its tool-call ids with
``tool_response_queue.ids.append(...)``, so any conversation with a tool call fails there. When the
immutable sandbox refuses a mutation, the template is rendered again here in jinja's ordinary
sandbox (attribute access still guarded; only lists and dicts may change), with the same
environment as Hugging Face's (trim/lstrip blocks, loop controls, its ``tojson``,
``raise_exception``, ``strftime_now``) and the same reasoning-field aliases.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

__all__ = ["is_mutation_refusal", "render_mutable"]


def is_mutation_refusal(exc: BaseException) -> bool:
    """Whether jinja's immutable sandbox refused a list/dict mutation (not any other error)."""
    from jinja2.exceptions import SecurityError

    return isinstance(exc, SecurityError) and "is unsafe" in str(exc)


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


@lru_cache(maxsize=8)
def _compile(template: str) -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def _aliased(message: dict[str, Any]) -> dict[str, Any]:
    reasoning = next((message[k] for k in ("reasoning_content", "thinking", "reasoning") if message.get(k)), None)
    return message if reasoning is None else {"thinking": reasoning, **message, "reasoning_content": reasoning}


def render_mutable(template: str, messages: list[dict[str, Any]], **context: Any) -> str:
    """``template`` rendered in the mutable sandbox (``context``: tools, special tokens, switches)."""
    return str(_compile(template).render(messages=[_aliased(m) for m in messages], **context))
