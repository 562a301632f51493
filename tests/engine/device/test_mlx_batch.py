"""Continuous batching (``--max-concurrent``) with the tiny real model, over HTTP.

Requests decoded together in one batch must give exactly what they give one at a time, each with
its own prompt, cap, stop string and grammar; a client that leaves frees its row and its slot.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.device.worker import DeviceWorker
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.settings import Settings
from tinytitan.testing.device import EXACT
from tinytitan.testing.lifecycle import Recorder
from tinytitan.testing.server import LiveServer, live_server

OFF = {"chat_template_kwargs": {"enable_thinking": False}}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "rank": {"enum": [1, 2, 3]}},
    "required": ["city", "rank"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def live(tiny_dir: Path) -> Iterator[LiveServer]:
    # no prompt cache: a reused prefix is not what these tests compare
    backend = MlxBackend(str(tiny_dir), prompt_cache_entries=0, max_concurrent=4, device=EXACT)
    with live_server(backend, settings=Settings(queue_limit=0)) as server:
        yield server


def runner(live: LiveServer) -> MlxBatch:
    backend = live.engine.backend
    assert isinstance(backend, MlxBackend) and backend.batch is not None
    return backend.batch


def wait_until(condition: Callable[[], bool], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def ask(live: LiveServer, content: str, **fields: Any) -> dict[str, Any]:
    body = {
        "model": live.engine.info.id,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        **OFF,
        **fields,
    }
    r = httpx.post(live.v1 + "/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def delta_text(line: str) -> str:
    """The content of a Chat Completions stream line ('' for anything else)."""
    if not line.startswith("data: {"):
        return ""
    choices = json.loads(line[6:]).get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def outcome(obj: dict[str, Any]) -> tuple[str, str, int]:
    choice = obj["choices"][0]
    return choice["message"]["content"], choice["finish_reason"], obj["usage"]["completion_tokens"]


def test_four_at_once_give_what_each_gives_alone(live: LiveServer) -> None:
    probe = ask(live, "Name three rivers.", max_tokens=24)["choices"][0]["message"]["content"]
    stop = probe[6:9]
    assert stop and probe.count(stop) >= 1
    requests: list[tuple[str, dict[str, Any]]] = [
        ("Tell me about the sea.", {"max_tokens": 40}),
        ("A short one.", {"max_tokens": 7}),
        ("Name three rivers.", {"max_tokens": 24, "stop": [stop]}),
        (
            "Give me a city as JSON.",
            {
                "max_tokens": 60,
                "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}},
            },
        ),
    ]
    alone = [outcome(ask(live, text, **fields)) for text, fields in requests]
    assert alone[2][1] == "stop" and not alone[2][0].endswith(stop)
    assert alone[1][1] == "length" and alone[1][2] == 7
    document = json.loads(alone[3][0])
    assert set(document) == {"city", "rank"}
    barrier = threading.Barrier(len(requests))

    def together(item: tuple[str, dict[str, Any]]) -> tuple[str, str, int]:
        barrier.wait()
        return outcome(ask(live, item[0], **item[1]))

    runner(live).peak_rows = 0
    with ThreadPoolExecutor(len(requests)) as pool:
        batched = list(pool.map(together, requests))
    assert batched == alone
    assert runner(live).peak_rows >= 3  # they really shared the batch


def test_cancelling_one_leaves_the_others_intact_and_frees_its_slot(live: LiveServer) -> None:
    others = [("First of three.", 60), ("Second of three.", 70), ("Third of three.", 80)]
    alone = [outcome(ask(live, text, max_tokens=n)) for text, n in others]
    victim_seen = threading.Event()
    victim_closed = threading.Event()

    def victim() -> None:
        body = {
            "model": live.engine.info.id,
            "messages": [{"role": "user", "content": "Talk for a long time."}],
            "max_tokens": 2000,
            "temperature": 0,
            "stream": True,
            **OFF,
        }
        with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=300) as r:
            deltas = 0
            for line in r.iter_lines():
                if delta_text(line):
                    deltas += 1
                if deltas >= 3:
                    victim_seen.set()
                    break  # the client goes away mid-stream
        victim_closed.set()

    with ThreadPoolExecutor(4) as pool:
        gone = pool.submit(victim)
        assert victim_seen.wait(120)
        futures = [pool.submit(lambda t, n: outcome(ask(live, t, max_tokens=n)), t, n) for t, n in others]
        assert victim_closed.wait(60)
        # its slot comes back while the three still run: a fifth request is admitted, not refused
        # every one of the three still running is admitted and the victim's slot is not among them
        wait_until(lambda: live.engine.queue.running == sum(not f.done() for f in futures))
        fifth = ask(live, "And a fifth.", max_tokens=3)
        assert fifth["choices"][0]["finish_reason"] == "length"
        results = [f.result(timeout=300) for f in futures]
        gone.result()
    assert results == alone
    assert live.engine.backend.tokens_generated < 10**6  # type: ignore[attr-defined]
    wait_until(lambda: live.engine.queue.running == 0)


def test_a_newcomers_long_prompt_is_prefilled_between_decode_steps(live: LiveServer) -> None:
    from tinytitan.engine.device.mlx_batch import PREFILL_STEP

    started = threading.Event()
    first_of_long = threading.Event()
    tokens_while_prefilling: list[int] = []

    def running() -> None:
        body = {
            "model": live.engine.info.id,
            "messages": [{"role": "user", "content": "Keep going."}],
            "max_tokens": 400,
            "temperature": 0,
            "stream": True,
            **OFF,
        }
        with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=300) as r:
            for line in r.iter_lines():
                if delta_text(line):
                    started.set()
                    if not first_of_long.is_set() and submitted.is_set():
                        tokens_while_prefilling.append(1)

    submitted = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        stream = pool.submit(running)
        assert started.wait(120)
        steps_before = len(runner(live).steps)
        submitted.set()
        long_prompt = "word " * (3 * PREFILL_STEP)  # three chunks and more
        body = {
            "model": live.engine.info.id,
            "messages": [{"role": "user", "content": long_prompt}],
            "max_tokens": 2,
            "temperature": 0,
            "stream": True,
            **OFF,
        }
        with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=300) as r:
            for line in r.iter_lines():
                if delta_text(line):
                    first_of_long.set()
        stream.result(timeout=300)
    during = list(runner(live).steps)[steps_before:]
    prefilling = [(rows, n) for rows, n, _seconds in during if n > 0]
    assert len(prefilling) >= 3  # the long prompt went in chunk by chunk …
    assert all(n <= PREFILL_STEP for _rows, n in prefilling)  # … never more than one chunk per step …
    assert all(rows >= 1 for rows, _n in prefilling)  # … each step also decoding the running stream
    assert len(tokens_while_prefilling) >= 3


def test_a_lone_long_prompt_is_prefilled_in_large_chunks(live: LiveServer) -> None:
    from tinytitan.engine.device.interrupt import LAYER_WORK
    from tinytitan.engine.device.mlx_batch import PREFILL_ALONE, PREFILL_STEP

    wait_until(lambda: live.engine.queue.running == 0)
    steps_before = len(runner(live).steps)
    body = {
        "model": live.engine.info.id,
        "messages": [{"role": "user", "content": "word " * (3 * PREFILL_STEP)}],
        "max_tokens": 2,
        "temperature": 0,
        **OFF,
    }
    response = httpx.post(live.v1 + "/chat/completions", json=body, timeout=300)
    assert response.status_code == 200
    prompt_tokens = response.json()["usage"]["prompt_tokens"]
    prefilling = [n for _rows, n, _seconds in list(runner(live).steps)[steps_before:] if n > 0]
    assert prompt_tokens > 3 * PREFILL_STEP
    # no stream to hold up: the largest chunks whose one layer is at most LAYER_WORK tokens' work (the
    # tiny model has 2 layers: 512 tokens), so that a client that leaves waits for one layer at most
    alone = runner(live).prefill_alone
    assert alone == min(PREFILL_ALONE, LAYER_WORK * 2) > PREFILL_STEP
    full, rest = divmod(prompt_tokens - 1, alone)
    assert prefilling == [alone] * full + ([rest] if rest else [])


def test_seeded_sampled_requests_draw_from_their_own_random_streams(live: LiveServer) -> None:
    requests: list[tuple[str, dict[str, Any]]] = [
        ("Tell a tale.", {"temperature": 1.0, "seed": 7, "max_tokens": 24}),
        ("Tell a tale.", {"temperature": 1.0, "seed": 8, "max_tokens": 24}),
        ("Another one.", {"temperature": 0.8, "top_p": 0.9, "seed": 7, "max_tokens": 20}),
        ("And a third.", {"temperature": 1.2, "top_k": 40, "seed": 99, "max_tokens": 16}),
    ]
    alone = [outcome(ask(live, text, **fields)) for text, fields in requests]
    assert outcome(ask(live, requests[0][0], **requests[0][1])) == alone[0]  # a seed reproduces
    assert alone[0] != alone[1]  # another seed draws otherwise
    barrier = threading.Barrier(len(requests))

    def together(item: tuple[str, dict[str, Any]]) -> tuple[str, str, int]:
        barrier.wait()
        return outcome(ask(live, item[0], **item[1]))

    runner(live).peak_rows = 0
    with ThreadPoolExecutor(len(requests)) as pool:
        batched = list(pool.map(together, requests))
    assert batched == alone  # no request's draws depend on who else is in the batch
    assert runner(live).peak_rows >= 3


# -- the runner on its own -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model(tiny_dir: Path) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True):  # loaded here, then stepped by the workers' own device threads
        import mlx.core as mx
        from mlx_lm.utils import load_model

        loaded, _config = load_model(tiny_dir, lazy=True)
        mx.eval(loaded.parameters())
        return loaded


class Fixed(Recorder):
    """A loaded model whose batch the test makes."""

    def __init__(self, make: Callable[[], Batch]) -> None:
        super().__init__("m", [])
        self.make = make

    def open_batch(self) -> Batch:
        return self.make()


class Inbox:
    """Stands in for the event loop the device worker hands each step's outputs to."""

    def __init__(self) -> None:
        self.items: queue.SimpleQueue[Output] = queue.SimpleQueue()

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)


def make_worker(model: Any, processors: Callable[..., list[Any]] | None = None) -> DeviceWorker:
    from tinytitan.engine.device.sampling import make_processors
    from tinytitan.engine.prompt_cache.memory import PromptCache

    backend = Fixed(lambda: MlxBatch(model, PromptCache(0), "m", [], 4, processors=processors or make_processors))
    return DeviceWorker(lambda _id: backend)


def drain(row: Row) -> list[Any]:
    """The row's tokens, then its finish reason or error."""
    items: list[Any] = []
    inbox: Inbox = row.loop  # type: ignore[assignment]
    while True:
        out = inbox.items.get(timeout=120)
        assert out.row is row
        items += out.tokens
        if out.last:
            return [*items, out.error or out.finish]


def rows(prompts: list[list[int]], seeds: list[int], n: int = 12) -> list[Row]:
    from tinytitan.engine.request import Sampling

    made = []
    for prompt, seed in zip(prompts, seeds, strict=True):
        inbox = Inbox()
        request = SimpleNamespace(sampling=Sampling(temperature=0.0, seed=seed))
        made.append(Row("m", request, Prompt("", len(prompt), prompt), n, inbox.items.put, inbox))  # type: ignore[arg-type]
    return made


PROMPTS = [[10, 20, 30, 40], [50, 60, 70], [80, 90, 100, 110, 120]]


def test_a_failing_processor_fails_its_own_row_only(model: Any) -> None:
    from tinytitan.engine.errors import GenerationFailed

    def processors(sampling: Any, _tokens: Any, _reused: int) -> list[Any]:
        def boom(_tokens: Any, _logits: Any) -> Any:
            raise ValueError("the grammar rejects this")

        return [boom] if sampling.seed == 13 else []

    worker = make_worker(model, processors)
    alone = []
    for r in rows(PROMPTS[:2], [1, 2]):
        worker.submit(r)
        alone.append(drain(r))
    together = rows([*PROMPTS[:2], PROMPTS[2]], [1, 2, 13])
    for r in together:
        worker.submit(r)
    results = [drain(r) for r in together]
    worker.close()
    assert isinstance(results[2][-1], GenerationFailed) and results[2][:-1] == []
    assert results[:2] == alone and [len(r) for r in alone] == [13, 13]  # twelve tokens and "length" each
    assert alone[0][-1] == "length"


def test_a_batch_that_fails_fails_its_rows_and_the_next_request_starts_afresh(model: Any) -> None:
    from tinytitan.engine.errors import GenerationFailed

    class Flaky:
        """The model, failing on its third call."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.calls = inner, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("out of memory")
            return self.inner(*args, **kwargs)

    worker = make_worker(Flaky(model))
    first = rows(PROMPTS[:2], [1, 2], n=20)
    for r in first:
        worker.submit(r)
    assert all(isinstance(drain(r)[-1], GenerationFailed) for r in first)
    (again,) = rows(PROMPTS[:1], [1], n=5)
    worker.submit(again)
    result = drain(again)
    worker.close()
    assert len(result) == 6 and result[-1] == "length"


def test_a_cancelled_long_prefill_leaves_within_one_small_step_of_work(model: Any, monkeypatch: Any) -> None:
    """Issue 26, item 4: a client leaves during a lone prompt's prefill chunk; the device is free for
    the next request after at most ``LAYER_WORK`` tokens' work — counted in layer calls, not time."""
    from mlx_lm.models.qwen3 import TransformerBlock

    from tinytitan.engine.device.interrupt import LAYER_WORK

    layers = len(model.layers)
    (follow,) = rows([PROMPTS[0]], [1])
    worker = make_worker(model)
    worker.submit(follow)
    alone = drain(follow)  # what the follow-up gives on its own

    (long,) = rows([list(range(1000, 6000))], [1])  # 5,000 tokens: a lone prompt, several chunks
    (follow,) = rows([PROMPTS[0]], [1])
    seen: list[int] = []  # prompt tokens per layer call of the long prompt, in order
    cancelled_at: list[int] = []  # index into ``seen`` of the layer call running when the client left
    original = TransformerBlock.__call__

    def counting(self: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        if x.shape[1] > len(PROMPTS[0]):  # a chunk of the long prompt (not a decode, not the follow-up)
            seen.append(x.shape[1])
            if len(seen) == layers + 1:  # the first layer of the second chunk: the client leaves now
                cancelled_at.append(len(seen) - 1)
                worker.cancel(long)
                worker.submit(follow)
        return original(self, x, *args, **kwargs)

    monkeypatch.setattr(TransformerBlock, "__call__", counting)
    worker.submit(long)
    first = follow.loop.items.get(timeout=120)  # type: ignore[attr-defined]
    assert first.row is follow and first.cached == 0
    rest = drain(follow)
    worker.close()
    assert cancelled_at == [layers]
    # whole-model tokens' work run from the moment the client left: a layer call over n tokens is n / layers
    after = sum(seen[cancelled_at[0] :]) / layers
    assert after <= LAYER_WORK, f"{after:.0f} tokens' work ran after the client left"
    assert rest == alone  # greedy output unchanged
    inbox: Inbox = long.loop  # type: ignore[assignment]
    handed = [inbox.items.get_nowait() for _ in range(inbox.items.qsize())]
    assert [(o.tokens, o.last) for o in handed] == [([], False)]  # admitted, then nothing: it just left


def test_a_lone_row_decodes_without_a_mask(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """mlx-lm's batch cache builds an all-true mask for a lone row's step; the batch routes it away (kv/masks.py)."""
    from tinytitan.engine.kv import masks

    asked: list[tuple[int, bool]] = []
    real = masks.lone_row

    def spy(cache: Any, n: int, **kwargs: Any) -> bool:
        lone = real(cache, n, **kwargs)
        asked.append((n, lone))
        return lone

    monkeypatch.setattr(masks, "lone_row", spy)
    ask(live, "Count to five.", max_tokens=6)
    assert masks.installed()
    steps = [lone for n, lone in asked if n == 1]
    assert len(steps) >= 2 and all(steps)  # every one-token step of the lone row went without
    assert any(n > 1 and not lone for n, lone in asked)  # its prompt's chunk kept its causal mask
