"""The compaction payload (reference §11): how a note travels in a ``compaction`` item and comes back.

Base64 of compact sorted-key JSON ``{createdAt, mode, model, read, summary, v}`` (``read`` and
``prunes`` since issue 40; a payload without them reads as before). ``prunes`` marks a note made by
server-side compaction (``context_management``): it stands for everything the conversation held
before it, so the items before it are left out when it comes back.
"""

from __future__ import annotations

import base64
import binascii
import json
import time

from tinytitan.engine.errors import InvalidRequest

__all__ = ["PAYLOAD_VERSION", "decode_payload", "encode_payload", "summary_preamble"]

PAYLOAD_VERSION = 1


def encode_payload(
    summary: str,
    mode: str,
    model: str,
    created_at: int | None = None,
    *,
    read: str | None = None,
    prunes: bool = False,
) -> str:
    body: dict[str, object] = {
        "createdAt": int(time.time()) if created_at is None else created_at,
        "mode": mode,
        "model": model,
        "summary": summary,
        "v": PAYLOAD_VERSION,
    }
    if read is not None:
        body["read"] = read
    if prunes:
        body["prunes"] = True
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
    """How a decoded note joins the conversation (the system block, or the turn that replaces what it
    summarised)."""
    return (
        "This session continues an earlier one that was compacted. The summary of the earlier session, "
        "to continue from:\n\n" + summary.strip()
    )
