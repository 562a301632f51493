"""A catalog of two tiny real models (and one broken directory) served over HTTP (issue 15).

Turns switch between models on all three protocols, each switch is logged, requests queued
behind a switch keep their order, and facts / count_tokens for the model that is not resident
come from its files without loading it (reference §3, §12, §13).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tinytitan.engine.device.batch import Row
from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.device.placement import has_accelerator
from tinytitan.engine.models.catalog import CatalogEntry, scan
from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, Message
from tinytitan.settings import Settings
from tinytitan.testing.catalog import B_CONTEXT, B_DEFAULTS, build_catalog
from tinytitan.testing.server import LiveServer, live_server

T = TypeVar("T")
A, B = "tiny-a", "tiny-b"
OFF = {"chat_template_kwargs": {"enable_thinking": False}}
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def factory(entry: CatalogEntry, model_id: str, device: str | None) -> MlxBackend:
    return MlxBackend(str(entry.path), model_id=model_id, device=device)


@pytest.fixture(scope="module")
def live(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = build_catalog(tmp_path_factory.mktemp("catalog") / "models", tiny_dir)
    models = ModelManager.from_catalog(scan([root], quiet=True), factory, cpu_variants=has_accelerator())
    # one generation at a time: the arrival-order test holds the one generation thread
    with live_server(models, settings=Settings(queue_limit=8, max_concurrent=1)) as server:
        yield server


def on_server(live: LiveServer, coro: Coroutine[Any, Any, T]) -> T:
    assert live.loop is not None
    return asyncio.run_coroutine_threadsafe(coro, live.loop).result(timeout=120)


def models_of(live: LiveServer) -> ModelManager:
    return live.engine.models


def ask(live: LiveServer, protocol: str, model: str, text: str = "Say something.", **extra: Any) -> httpx.Response:
    if protocol == "chat":
        path = "/chat/completions"
        body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 4, **OFF}
    elif protocol == "responses":
        path = "/responses"
        body = {"model": model, "input": text, "max_output_tokens": 4, "reasoning": {"effort": "none"}}
    else:
        path = "/messages"
        body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 4}
        body["thinking"] = {"type": "disabled"}
    return httpx.post(live.v1 + path, json={**body, "temperature": 0, **extra}, timeout=300)


def sse_frames(text: str) -> list[tuple[str | None, Any]]:
    """(event name, decoded data) for each frame of an SSE body (``[DONE]`` kept as the string)."""
    frames: list[tuple[str | None, Any]] = []
    for block in text.split("\n\n"):
        event, data = None, []
        for line in block.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            raw = "\n".join(data)
            frames.append((event, raw if raw == "[DONE]" else json.loads(raw)))
    return frames


def answered_model(response: httpx.Response, stream: bool) -> str:
    """The model a complete, error-free answer names (its object's, or its stream's first frame's)."""
    assert response.status_code == 200, response.text
    if not stream:
        return str(response.json()["model"])
    frames = sse_frames(response.text)
    names = [event or "" for event, _ in frames]
    assert not any(isinstance(d, dict) and "error" in d and d.get("object") != "response" for _, d in frames)
    assert "error" not in names and "response.failed" not in names, response.text
    event, first = frames[0]
    if event == "response.created":
        assert names[-1] in ("response.completed", "response.incomplete")
        return str(first["response"]["model"])
    if event == "message_start":
        assert names[-1] == "message_stop"
        return str(first["message"]["model"])
    assert frames[-1][1] == "[DONE]"
    return str(first["model"])


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
@pytest.mark.parametrize("stream", [False, True])
def test_turns_switch_models_a_b_a(
    live: LiveServer, protocol: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    models = models_of(live)
    before = len(models.switches)
    with caplog.at_level(logging.INFO, logger="tinytitan.models"):
        for model in (A, B, A):
            response = ask(live, protocol, model, stream=stream)
            assert answered_model(response, stream) == model
    assert models.resident == A
    new = [(s.previous, s.current) for s in models.switches[before:]]
    assert new[-2:] == [(A, B), (B, A)]
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("switched model")]
    assert logged[-2].startswith(f"switched model {A} -> {B} in ") and logged[-1].startswith(
        f"switched model {B} -> {A} in "
    )


def test_the_list_names_both_models_and_nothing_else(live: LiveServer) -> None:
    listing = httpx.get(live.v1 + "/models").json()
    ids = [m["id"] for m in listing["data"]]
    cpu = [f"{A}@cpu", f"{B}@cpu"]
    # <id>@cpu only where an accelerator and the CPU are two real engines; never on a CPU-only box
    assert ids == ([A, f"{A}@cpu", B, f"{B}@cpu"] if has_accelerator() else [A, B])
    assert not any(i.endswith("-fast") for i in ids) and "broken" not in ids
    if not has_accelerator():
        assert not set(cpu) & set(ids)
    anthropic = httpx.get(live.v1 + "/models", headers=ANTHROPIC).json()
    assert [m["id"] for m in anthropic["data"]] == ids and anthropic["first_id"] == A


def test_details_carry_the_catalog_facts(live: LiveServer) -> None:
    listing = httpx.get(live.v1 + "/models", params={"details": "true"}).json()
    facts = {m["id"]: m["tinytitan"] for m in listing["data"]}
    assert facts[B]["context_window"] == B_CONTEXT and facts[B]["architecture"] == "qwen3"
    assert facts[B]["default_reasoning"] == "off" and facts[A]["tool_call_family"] == "json_tools"
    assert [i for i, f in facts.items() if f["resident"]] == (
        [models_of(live).resident] if models_of(live).resident else []
    )
    plain = httpx.get(live.v1 + "/models").json()["data"][0]
    # the reference shape, the context facts and what the model reads, unless details are asked for
    assert set(plain) == {"id", "object", "owned_by", "context_window", "max_output_tokens", "input_modalities"}
    assert plain["input_modalities"] == ["text"]  # the catalog's models are text-only


def test_every_entry_carries_its_own_context_window_and_output_cap(live: LiveServer) -> None:
    windows = {i: models_of(live).info(i).context_window for i in models_of(live).ids()}
    assert windows[B] == B_CONTEXT and windows[A] != B_CONTEXT  # two windows: each entry says its own
    openai = httpx.get(live.v1 + "/models").json()["data"]
    # the output cap is one a client plans with: a quarter of the window (at most 32,000), not the window
    assert {m["id"]: (m["context_window"], m["max_output_tokens"]) for m in openai} == {
        i: (w, min(32_000, w // 4)) for i, w in windows.items()
    }
    anthropic = httpx.get(live.v1 + "/models", headers=ANTHROPIC).json()["data"]
    assert {m["id"]: (m["max_input_tokens"], m["max_tokens"]) for m in anthropic} == {
        i: (w, min(32_000, w // 4)) for i, w in windows.items()
    }
    one = httpx.get(live.v1 + f"/models/{B}-fast").json()
    assert (one["context_window"], one["max_output_tokens"]) == (B_CONTEXT, min(32_000, B_CONTEXT // 4))
    one = httpx.get(live.v1 + f"/models/{B}", headers=ANTHROPIC).json()
    assert (one["max_input_tokens"], one["max_tokens"]) == (B_CONTEXT, min(32_000, B_CONTEXT // 4))
    codex = {m["slug"]: m for m in httpx.get(live.v1 + "/models").json()["models"]}  # Codex's discovery
    assert {i: m["context_window"] for i, m in codex.items()} == windows


def test_a_fast_alias_of_a_catalog_id_is_served_under_its_base_id(live: LiveServer) -> None:
    response = ask(live, "chat", f"{B}-fast")
    assert answered_model(response, False) == B
    assert httpx.get(live.v1 + f"/models/{B}-fast").json()["id"] == f"{B}-fast"


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_name_is_refused_naming_the_field_and_what_is_served(
    live: LiveServer, protocol: str, stream: bool
) -> None:
    response = ask(live, protocol, "claude-sonnet-4-5", stream=stream)
    assert response.status_code == 404, response.text  # refused before any stream opens
    error = response.json()["error"]
    if protocol == "messages":
        assert error["type"] == "not_found_error" and error["message"].startswith("model: ")
    else:
        assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "model_not_found", "model")
    assert "claude-sonnet-4-5" in error["message"] and f"{A}, {B}" in error["message"]


def test_an_unknown_name_is_refused_by_count_tokens_and_the_model_routes(live: LiveServer) -> None:
    body = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
    counted = httpx.post(live.v1 + "/messages/count_tokens", json=body, timeout=60)
    assert counted.status_code == 404 and counted.json()["error"]["message"].startswith("model: ")
    assert f"{A}, {B}" in counted.json()["error"]["message"]
    for name in ("broken", "nope", f"{A}@gpu"):
        one = httpx.get(live.v1 + f"/models/{name}")
        assert one.status_code == 404 and one.json()["error"]["param"] == "model"


def test_facts_and_count_tokens_of_the_other_model_do_not_load_it(live: LiveServer) -> None:
    models = models_of(live)
    assert ask(live, "chat", A).status_code == 200
    assert models.resident == A
    switches = len(models.switches)
    one = httpx.get(live.v1 + f"/models/{B}", headers=ANTHROPIC)
    assert one.status_code == 200 and one.json()["id"] == B

    def count(model: str, **extra: Any) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": "count these words please"}], **extra}
        response = httpx.post(live.v1 + "/messages/count_tokens", json=body, timeout=60)
        assert response.status_code == 200, response.text
        return int(response.json()["input_tokens"])

    # B renders with its own default (thinking off: the template writes an empty think block), counted
    # by its own tokenizer — the same prompt A renders when asked for thinking off
    assert count(B) == count(A, thinking={"type": "disabled"}) > count(A) > 5
    # validation reads B's own config: its context window and sampling defaults, while A stays resident
    validated, _prompt = on_server(live, live.engine.validate(ChatRequest(model=B, messages=(Message("user", "hi"),))))
    assert validated.cap == B_CONTEXT and validated.sampling.temperature == B_DEFAULTS["temperature"]
    assert validated.sampling.top_k == B_DEFAULTS["top_k"] and validated.reasoning_level == "off"
    too_long = "word " * (B_CONTEXT + 100)
    refused = ask(live, "chat", B, too_long)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded"
    assert models.resident == A and len(models.switches) == switches
    assert not models.backend(B).loaded


async def _occupy(live: LiveServer, gate: threading.Event) -> None:
    """Hold the engine's device thread until ``gate`` opens."""
    live.engine.device.run(lambda: gate.wait(120))


def test_concurrent_requests_for_both_models_complete_in_arrival_order(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = models_of(live)
    generated: list[str] = []  # the last user text of every generation, in the order they ran

    def recording(batch: MlxBatch, row: Row, original: Any = MlxBatch.add) -> Any:
        generated.append(row.request.turns[-1].text)
        return original(batch, row)

    monkeypatch.setattr(MlxBatch, "add", recording)
    order = [A, B, A, B, B, A]
    results: dict[int, int] = {}

    def send(i: int, model: str) -> None:
        results[i] = ask(live, ["chat", "responses", "messages"][i % 3], model, f"request {i}").status_code

    assert ask(live, "chat", A).status_code == 200  # A resident
    generated.clear()
    queue, gate = live.engine.queue, threading.Event()
    # hold the device thread while the requests arrive, one after another
    on_server(live, _occupy(live, gate))
    before = len(models.switches)
    threads = []
    try:
        for i, model in enumerate(order):
            thread = threading.Thread(target=send, args=(i, model))
            thread.start()
            threads.append(thread)
            deadline = time.monotonic() + 60
            while queue.running + queue.waiting < i + 1:  # admitted before the next one is sent
                assert time.monotonic() < deadline, "a request never reached the queue"
                time.sleep(0.005)
    finally:
        gate.set()
    for thread in threads:
        thread.join(timeout=300)
    assert results == {i: 200 for i in range(len(order))}
    assert generated == [f"request {i}" for i in range(len(order))]
    assert [(s.previous, s.current) for s in models.switches[before:]] == [(A, B), (B, A), (A, B), (B, A)]


def test_switching_back_finds_the_prefix_still_warm(live: LiveServer) -> None:
    prefix = "Here is a long shared context. " * 40
    ask(live, "chat", A, prefix + "First question?")
    ask(live, "chat", B, "something else")
    again = ask(live, "chat", A, prefix + "Second question?")
    assert again.status_code == 200
    assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 100


def test_unload_releases_the_resident_model_and_the_next_request_reloads(live: LiveServer) -> None:
    models = models_of(live)
    assert ask(live, "chat", B).status_code == 200
    assert httpx.post(live.v1 + "/models/unload").json() == {"status": "ok", "unloaded": True}
    assert models.resident is None and not models.backend(B).loaded
    assert httpx.post(live.v1 + "/models/unload").json() == {"status": "ok", "unloaded": False}
    assert answered_model(ask(live, "chat", A), False) == A and models.resident == A


def test_compaction_runs_on_the_model_it_names(live: LiveServer) -> None:
    body = {
        "model": B,
        "input": [{"role": "user", "content": "We decided to use tabs."}],
        "max_compaction_tokens": 16,
    }
    response = httpx.post(live.v1 + "/responses/compact", json=body, timeout=300)
    assert response.status_code == 200, response.text
    payload = response.json()["output"][-1]["encrypted_content"]
    assert json.loads(base64.b64decode(payload))["model"] == B
    assert models_of(live).resident == B
