"""Schema-driven fuzzing of every POST route (schemathesis + hypothesis; test extras only).

``fuzz(base_url, requests=N)`` reads the server's ``/openapi.json``, steers it a little towards
requests that get past the first checks (the served model name, known roles — while keeping the
free-form alternatives), and sends N generated requests spread over every POST route: schema-valid
bodies, schema-violating bodies (schemathesis' negative mode) and garbled bytes. Each answer must
be below 500 and every 4xx must be the protocol's error envelope; a chat stream must end with
``[DONE]``. Used by tests/api/test_fuzz.py (CI size) and benchmarks/fuzz.py (big runs).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tinytitan.eventstream import frames

__all__ = ["FUZZ_SCRIPT", "FuzzReport", "envelope_problem", "fuzz"]

# ``raw`` model text: the stub then skips its own structured-output check (a random schema would
# otherwise make the scripted reply a deliberate 500 "generation failed").
FUZZ_SCRIPT: dict[str, Any] = {
    "model": "stub-model",
    "rules": [
        {"when": {"last_role": "tool"}, "reply": {"raw": "done"}},
        {"reply": {"raw": "<think>fuzz</think>hello from tinytitan"}},
    ],
}

_ROLES = ["system", "developer", "user", "assistant", "tool"]


@dataclass
class FuzzReport:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def add_problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


def envelope_problem(path: str, status: int, body: bytes, *, anthropic: bool) -> str | None:
    """Why an error body is not the protocol's envelope (reference §2), or ``None``."""
    try:
        doc = json.loads(body)
    except ValueError:
        return f"{status} on {path}: body is not JSON: {body[:200]!r}"
    if anthropic:
        err = doc.get("error") if isinstance(doc, dict) else None
        ok = (
            isinstance(err, dict)
            and doc.get("type") == "error"
            and isinstance(err.get("type"), str)
            and isinstance(err.get("message"), str)
            and isinstance(doc.get("request_id"), str)
        )
    else:
        err = doc.get("error") if isinstance(doc, dict) else None
        ok = (
            isinstance(err, dict)
            and isinstance(err.get("message"), str)
            and isinstance(err.get("type"), str)
            and "code" in err
        )
    return None if ok else f"{status} on {path}: not the {'Anthropic' if anthropic else 'OpenAI'} envelope: {doc}"


def _steer(document: dict[str, Any], model: str) -> dict[str, Any]:
    """Offer the served model and the known roles as likely choices (the free-form ones stay)."""
    doc = copy.deepcopy(document)
    for schema in doc["components"]["schemas"].values():
        props = schema.get("properties", {})
        if "model" in props:
            props["model"] = {"anyOf": [{"const": model}, {"const": model}, {"const": model + "-fast"}, props["model"]]}
        if "role" in props:
            props["role"] = {"anyOf": [{"enum": _ROLES}, props["role"]]}
    return doc


_ODD_VALUES: list[Any] = [
    None,
    0,
    -1,
    2**64,
    -(2**63),
    1e308,
    -0.0,
    "",
    "x" * 70_000,
    [],
    {},
    True,
    [[[]]],
    {"type": "object"},
    "\u0000",
    "stub-model",
]


def _mutate(body: Any, content: bytes | None, mutation: tuple[Any, ...]) -> bytes | None:
    kind, n, junk, value = mutation
    if kind == "garble" or not isinstance(body, dict) or not body:
        raw = content or b""
        return raw[: n % (len(raw) + 1)] + junk
    body = dict(body)
    key = sorted(body)[n % len(body)]
    if kind == "drop":
        del body[key]
    elif kind == "retype":
        body[key] = value
    else:
        body["stream"] = not body.get("stream")
    return json.dumps(body).encode()


def fuzz(
    base_url: str, *, requests: int, model: str, seed: int = 0, timeout: float = 30.0, per_case: int = 3
) -> FuzzReport:
    """Send about ``requests`` requests: ``requests / per_case`` generated cases, each sent as
    generated plus ``per_case - 1`` cheap mutations of it (garbled bytes, a dropped or retyped
    field, ``stream`` flipped)."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from schemathesis.core.result import Ok
    from schemathesis.generation.modes import GenerationMode

    document = httpx.get(base_url + "/openapi.json", timeout=timeout).json()
    schema = schemathesis.openapi.from_dict(_steer(document, model))
    operations = []
    for result in schema.get_all_operations():
        if not isinstance(result, Ok):
            raise result.err()  # the server's own document does not parse: nothing to fuzz
        operations.append(result.ok())
    posts = [op for op in operations if op.method.upper() == "POST"]
    strategies = []
    for op in posts:
        strategies.append(op.as_strategy(GenerationMode.POSITIVE))
        strategies.append(op.as_strategy(GenerationMode.NEGATIVE))
    report = FuzzReport()
    client = httpx.Client(base_url=base_url, timeout=timeout)

    def send(method: str, path: str, content: bytes | None, headers: dict[str, str]) -> None:
        report.sent += 1
        try:
            with client.stream(method, path, content=content, headers=headers) as r:
                body = r.read()
        except httpx.HTTPError as exc:
            report.statuses[0] += 1
            report.add_problem(f"{method} {path}: transport error {exc!r} (crash or hang)")
            return
        report.statuses[r.status_code] += 1
        anthropic = path.startswith("/v1/messages")
        if r.status_code >= 500:
            report.add_problem(f"{r.status_code} on {method} {path} with {(content or b'')[:300]!r}: {body[:300]!r}")
        elif r.status_code >= 400:
            problem = envelope_problem(path, r.status_code, body, anthropic=anthropic)
            if problem:
                report.add_problem(problem)
        elif (
            r.headers.get("content-type", "").startswith("text/event-stream")
            and "/chat/" in path
            and [f.data for f in frames(body.decode(errors="replace"))][-1:] != ["[DONE]"]
        ):
            report.add_problem(f"chat stream without [DONE] on {path}: {body[-200:]!r}")

    def check(case: Any, mutations: list[tuple[Any, ...]]) -> None:
        kwargs = case.as_transport_kwargs(base_url=base_url)
        path = case.formatted_path
        headers = {k: v for k, v in (kwargs.get("headers") or {}).items() if k.lower() not in ("host", "origin")}
        body: Any = None
        if "json" in kwargs:
            body = kwargs["json"]
            content: bytes | None = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        else:
            data = kwargs.get("data")
            content = data.encode() if isinstance(data, str) else data
        send(case.method, path, content, headers)
        for mutation in mutations:  # cheap variants of the same case (generation is the slow part)
            variant = _mutate(body, content, mutation)
            if variant is not None:
                send(case.method, path, variant, {**headers, "content-type": "application/json"})

    mutations = st.lists(
        st.tuples(
            st.sampled_from(["garble", "drop", "retype", "stream"]),
            st.integers(0, 1 << 16),
            st.binary(max_size=8),
            st.sampled_from(_ODD_VALUES),
        ),
        min_size=per_case - 1,
        max_size=per_case - 1,
    )
    examples = max(1, -(-requests // per_case))

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies), mutations=mutations)
    def run(case: Any, mutations: list[tuple[Any, ...]]) -> None:
        check(case, mutations)

    from hypothesis import seed as hypothesis_seed

    try:
        hypothesis_seed(seed)(run)()
    finally:
        client.close()
    return report
