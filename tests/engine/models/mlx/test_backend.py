"""The mlx backend on the real engine path, with the tiny real model (issue #3)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlx.utils import tree_flatten

from tinytitan.engine.events import Finished, TextDelta
from tinytitan.engine.job import Completion
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.output.parser import Markers
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling
from tinytitan.engine.service import Engine
from tinytitan.testing.loop import run

OFF = ReasoningControls(enable_thinking=False)


@pytest.fixture(scope="module")
def engine(tiny_dir: Path) -> Iterator[Engine]:
    eng = Engine(MlxBackend(str(tiny_dir)))
    yield eng
    eng.shutdown()


@pytest.fixture()
def fresh(tiny_dir: Path) -> Iterator[Engine]:
    eng = Engine(MlxBackend(str(tiny_dir)))
    yield eng
    eng.shutdown()


def backend_of(engine: Engine) -> MlxBackend:
    assert isinstance(engine.backend, MlxBackend)
    return engine.backend


def chat(engine: Engine, *texts: str, **kw: Any) -> ChatRequest:
    roles = ["user", "assistant"]
    messages = tuple(Message(roles[i % 2], t) for i, t in enumerate(texts))
    kw.setdefault("reasoning", OFF)
    return ChatRequest(model=engine.info.id, messages=messages, **kw)


def complete(engine: Engine, request: ChatRequest) -> Completion:
    return run(engine.complete(request))


def test_loads_from_a_directory_without_weights_until_needed(tiny_dir: Path) -> None:
    backend = MlxBackend(str(tiny_dir))
    info = backend.info
    assert info.id == tiny_dir.name
    assert info.context_window == 40960
    assert info.defaults == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    assert info.reasoning_levels == ("off", "on") and info.default_reasoning == "on"
    assert not backend.loaded
    assert MlxBackend(str(tiny_dir), model_id="mine", max_context=1024).info.context_window == 1024
    assert MlxBackend(str(tiny_dir), model_id="mine").info.id == "mine"


def test_markers_and_tool_parser_come_from_mlx_lm(tiny_dir: Path) -> None:
    backend = MlxBackend(str(tiny_dir))
    assert backend.markers == Markers("<think>", "</think>", "<tool_call>", "</tool_call>")
    call = backend.tool_parser('\n{"name": "get", "arguments": {"a": 1}}\n', ())
    assert call == {"name": "get", "arguments": {"a": 1}}


def test_completion_reports_real_usage(engine: Engine) -> None:
    request = chat(engine, "Say something.", max_tokens=8, sampling=Sampling(seed=1))
    done = complete(engine, request)
    prompt = backend_of(engine).render(run(engine.validate(request))[0])
    usage = done.finished.usage
    assert usage is not None
    assert usage.prompt_tokens == prompt.n_tokens == len(prompt.tokens) > 0
    assert 0 < usage.completion_tokens <= 8
    assert backend_of(engine).loaded


def test_count_tokens_equals_usage_prompt_tokens(engine: Engine) -> None:
    request = chat(engine, "Count me, please: 1234 tokens?", max_tokens=2)
    counted = run(engine.count_tokens(request))
    usage = complete(engine, request).finished.usage
    assert usage is not None and counted == usage.prompt_tokens


def test_same_seed_same_text(engine: Engine) -> None:
    request = chat(engine, "Tell me a story.", max_tokens=24, sampling=Sampling(temperature=1.0, seed=42))
    first = complete(engine, request)
    second = complete(engine, request)
    assert first.text and first.text == second.text
    other = complete(
        engine, chat(engine, "Tell me a story.", max_tokens=24, sampling=Sampling(temperature=1.0, seed=43))
    )
    assert other.text != first.text


def test_max_tokens_ends_with_length(engine: Engine) -> None:
    done = complete(engine, chat(engine, "Go on.", max_tokens=5, sampling=Sampling(seed=3)))
    assert done.finished.reason == "length"
    assert done.finished.usage is not None and done.finished.usage.completion_tokens == 5


def test_stop_string_ends_the_answer_without_emitting_it(engine: Engine) -> None:
    greedy = Sampling(temperature=0.0)
    full = complete(engine, chat(engine, "Write words.", max_tokens=16, sampling=greedy)).text
    assert len(full) > 6
    stop = full[3:6]
    done = complete(engine, chat(engine, "Write words.", max_tokens=16, sampling=greedy, stop=(stop,)))
    assert done.text == full[: full.index(stop)]
    assert done.finished.reason == "stop" and done.finished.stop_sequence == stop
    assert done.finished.usage is not None and done.finished.usage.completion_tokens < 16


def test_penalties_run_and_stay_reproducible(engine: Engine) -> None:
    sampling = Sampling(temperature=0.8, seed=5, repetition_penalty=1.3, presence_penalty=1.5)
    first = complete(engine, chat(engine, "Repeat repeat repeat.", max_tokens=12, sampling=sampling))
    second = complete(engine, chat(engine, "Repeat repeat repeat.", max_tokens=12, sampling=sampling))
    plain = complete(
        engine, chat(engine, "Repeat repeat repeat.", max_tokens=12, sampling=Sampling(temperature=0.8, seed=5))
    )
    assert first.text == second.text
    assert first.finished.usage is not None and first.finished.usage.completion_tokens == 12
    assert plain.text != first.text


def test_second_turn_reuses_the_prefix(fresh: Engine) -> None:
    backend = backend_of(fresh)
    first_request = chat(fresh, "Hello, who are you?", max_tokens=6, sampling=Sampling(seed=9))
    first = complete(fresh, first_request)
    assert first.finished.usage is not None and first.finished.usage.cached_tokens == 0
    snapshots = backend.prompt_cache.snapshots()
    second_request = chat(fresh, "Hello, who are you?", first.text, "And then?", max_tokens=4)
    second_tokens = backend.render(run(fresh.validate(second_request))[0]).tokens
    from tinytitan.engine.prompt_cache.memory import common_prefix

    expected = min(max(common_prefix(s, second_tokens) for s in snapshots), len(second_tokens) - 1)
    first_prompt = backend.render(run(fresh.validate(first_request))[0]).tokens
    second = complete(fresh, second_request)
    usage = second.finished.usage
    assert usage is not None
    assert usage.cached_tokens == expected
    assert usage.cached_tokens >= common_prefix(first_prompt, second_tokens) > 0


def test_closing_the_stream_stops_the_worker_within_a_token(fresh: Engine) -> None:
    backend = backend_of(fresh)

    async def scenario() -> tuple[int, int]:
        job = await fresh.prepare(
            chat(fresh, "Talk for a long time.", max_tokens=3000, sampling=Sampling(temperature=1.0, seed=11))
        )
        events = job.events()
        seen = 0
        async for event in events:
            if isinstance(event, TextDelta):
                seen += 1
                if seen == 3:
                    break
        await events.aclose()  # what a client that went away does
        at_close = backend.tokens_generated
        await asyncio.wrap_future(fresh.device.run(lambda: None))  # every earlier row has left the device
        await fresh.queue.wait_idle()
        return at_close, backend.tokens_generated

    at_close, final = run(scenario())
    assert final - at_close <= 1
    assert final < 3000


def test_unload_then_generate_reloads(fresh: Engine) -> None:
    backend = backend_of(fresh)
    complete(fresh, chat(fresh, "One.", max_tokens=2))
    assert backend.loaded and len(backend.prompt_cache) == 1
    assert run(fresh.unload()) is True
    assert not backend.loaded and len(backend.prompt_cache) == 0
    assert run(fresh.unload()) is False
    done = complete(fresh, chat(fresh, "Two.", max_tokens=3))
    assert backend.loaded
    assert done.finished.usage is not None and done.finished.usage.completion_tokens == 3


def test_a_switch_unload_frees_the_weights_and_keeps_the_snapshots(fresh: Engine) -> None:
    import gc

    import mlx.core as mx

    backend = backend_of(fresh)
    complete(fresh, chat(fresh, "One.", max_tokens=2))
    params = tree_flatten(backend._model.parameters())
    assert isinstance(params, list)  # (path, array) pairs: no destination dict was given
    weights = sum(v.nbytes for _k, v in params)
    del params  # the test must not hold the weights itself
    held = fresh.device.run(mx.get_active_memory).result(60)
    gc.disable()  # the weights must go by reference counting alone (no collection pass on a switch)
    try:
        # as a model switch does it: on the device thread, which closes the batch first
        assert fresh.device.run(lambda: backend.unload(keep_prompt_cache=True)).result(60) is True
        freed = held - fresh.device.run(mx.get_active_memory).result(60)
    finally:
        gc.enable()
    assert freed >= weights * 0.99
    assert len(backend.prompt_cache) == 1  # a switch back finds it


def test_finished_is_last(engine: Engine) -> None:
    async def scenario() -> list[Any]:
        job = await engine.prepare(chat(engine, "Hi", max_tokens=3, stream=True))
        return [e async for e in job.events()]

    events = run(scenario())
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1


def test_count_text_uses_the_models_tokenizer(tiny_dir: Path) -> None:
    backend = MlxBackend(str(tiny_dir))
    text = "Compaction notes are measured with the model's own tokenizer: 12345."
    assert backend.count_text(text) == len(backend.tokenizer.encode(text, add_special_tokens=False))
    assert backend.count_text("") == 0
    assert backend.count_text("hello") < backend.count_text("hello world, again and again")


def test_a_float32_model_on_the_cpu_watches_the_free_cores(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model whose products run through the preloaded BLAS starts ``tinytitan.cpu_share``
    (issue 43: fewer product threads while other processes take cores); a GPU model does not."""
    import mlx.core as mx

    from tinytitan import cpu_share

    started: list[bool] = []
    monkeypatch.setattr(cpu_share, "start", lambda: started.append(True))
    eng = Engine(MlxBackend(str(tiny_dir), dtype="float32"))
    try:
        complete(eng, chat(eng, "hi", max_tokens=1))
    finally:
        eng.shutdown()
    assert started == ([True] if mx.default_device() == mx.cpu else [])
