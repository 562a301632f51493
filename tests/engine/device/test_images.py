"""Images through the engine on the tiny vision model (issue 41): the one queue, batch and prompt cache.

A request with a picture is rendered on the CPU pool (no MLX: the suite's device check would raise),
its features are computed on the device worker when its row joins the batch, and it decodes beside
text rows; the prompt cache keys the picture by its content.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.device.images import VIRTUAL_BASE, ImageModel
from tinytitan.engine.events import TextDelta
from tinytitan.engine.job import Completion
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, FormatRequest, Image, Message, Sampling
from tinytitan.engine.service import Engine
from tinytitan.testing.device import EXACT
from tinytitan.testing.images import checked_picture, image_message
from tinytitan.testing.loop import run
from tinytitan.testing.waiting import wait_until

RED, BLUE = checked_picture((200, 10, 10)), checked_picture((10, 10, 200))
GREEDY = Sampling(temperature=0)


@pytest.fixture(scope="module")
def engine(tiny_vision_dir: Path) -> Iterator[Engine]:
    backend = MlxBackend(str(tiny_vision_dir), max_concurrent=4, device=EXACT)
    engine = Engine(backend)
    yield engine
    engine.shutdown()


def backend_of(engine: Engine) -> MlxBackend:
    backend = engine.backend
    assert isinstance(backend, MlxBackend)
    return backend


def ask(engine: Engine, *parts: str | Image, max_tokens: int = 8) -> ChatRequest:
    images = any(isinstance(p, Image) for p in parts)
    message = image_message(*parts) if images else Message("user", "".join(p for p in parts if isinstance(p, str)))
    return ChatRequest(model=engine.info.id, messages=(message,), max_tokens=max_tokens, sampling=GREEDY)


def complete(engine: Engine, *requests: ChatRequest) -> list[Completion]:
    async def gather() -> list[Completion]:
        return list(await asyncio.gather(*(engine.complete(r) for r in requests)))

    return list(run(gather()))


def tokens(engine: Engine, request: ChatRequest) -> list[int]:
    async def render() -> list[int]:
        _validated, prompt = await engine.validate(request)
        return list(prompt.tokens)

    return list(run(render()))


def test_the_model_reports_vision_and_answers_a_picture(engine: Engine) -> None:
    assert engine.info.vision
    request = ask(engine, RED, "What is in the picture?")
    prompt = tokens(engine, request)
    image_tokens = [t for t in prompt if t >= VIRTUAL_BASE]
    assert len(image_tokens) == 12  # a 100 × 50 picture: two tiles and the global view, 4 tokens each
    text_only = tokens(engine, ask(engine, "What is in the picture?"))
    assert len(prompt) > len(text_only) + len(image_tokens)  # the tile markers count too
    (done,) = complete(engine, request)
    assert done.finished.reason == "length" and done.finished.usage.completion_tokens == 8
    assert done.finished.usage.prompt_tokens == len(prompt)  # usage counts the image tokens as the model sees them
    assert run(engine.count_tokens(request)) == len(prompt)
    assert isinstance(backend_of(engine).model, ImageModel) and backend_of(engine).model.holding == 0


def test_the_same_picture_twice_hits_the_prompt_cache_and_another_picture_never_does(engine: Engine) -> None:
    text = "Describe this screenshot in one line, please."
    first = ask(engine, BLUE, text)
    prompt = tokens(engine, first)
    image_at = next(i for i, t in enumerate(prompt) if t >= VIRTUAL_BASE)
    (one,) = complete(engine, first)
    (again,) = complete(engine, first)
    assert again.finished.usage.cached_tokens >= len(prompt) - 1  # the whole prompt, picture included
    assert again.text == one.text
    other = checked_picture((10, 200, 10))  # same size, same text, other content
    assert tokens(engine, ask(engine, other, text))[:image_at] == prompt[:image_at]
    (miss,) = complete(engine, ask(engine, other, text))
    assert miss.finished.usage.cached_tokens <= image_at  # the shared text before it, never the picture


def test_a_text_row_and_an_image_row_in_one_batch_give_what_each_gives_alone(engine: Engine) -> None:
    text_request = ask(engine, "Count from one to twenty in words: one, two, three,", max_tokens=24)
    image_request = ask(engine, "Compare ", RED, " with ", BLUE, " in one word.", max_tokens=24)
    backend = backend_of(engine)
    backend.prompt_cache.clear(backend.identity)  # each row prefills its whole prompt, alone and together
    (text_alone,) = complete(engine, text_request)
    backend.prompt_cache.clear(backend.identity)
    (image_alone,) = complete(engine, image_request)
    backend.prompt_cache.clear(backend.identity)
    assert backend.batch is not None
    backend.batch.peak_rows = 0
    together = complete(engine, text_request, image_request)
    assert backend.batch.peak_rows == 2
    assert [c.text for c in together] == [text_alone.text, image_alone.text]
    assert len(tokens(engine, image_request)) - len(tokens(engine, ask(engine, "Compare  with  in one word."))) > 24


def test_a_grammar_and_penalties_hold_in_a_request_with_a_picture(engine: Engine) -> None:
    """The penalties' token context holds the picture's virtual ids (read as the image token), the
    JSON schema's mask holds the answer to the schema."""
    schema: dict[str, Any] = {"type": "object", "properties": {"colour": {"enum": ["red", "blue"]}}}
    schema |= {"required": ["colour"], "additionalProperties": False}
    fmt = FormatRequest("json_schema", "response_format", "response_format.json_schema.schema", schema=schema)
    penalised = Sampling(temperature=0, repetition_penalty=1.3, presence_penalty=0.5)
    request = ChatRequest(
        model=engine.info.id,
        messages=(image_message(RED, "Which colour? Answer in JSON."),),
        max_tokens=64,
        sampling=penalised,
        output_format=fmt,
    )
    (done,) = complete(engine, request)
    assert json.loads(done.text)["colour"] in ("red", "blue")


def test_a_cancelled_image_row_leaves_the_batch_and_its_features(engine: Engine) -> None:
    backend = backend_of(engine)
    model = backend.model
    assert isinstance(model, ImageModel)

    async def leave_at_first_token() -> int:
        job = await engine.prepare(ask(engine, BLUE, "A long answer, please.", max_tokens=4000))
        async with contextlib.aclosing(job.events()) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        return backend.tokens_generated

    async def leave_at_once() -> None:
        job = await engine.prepare(ask(engine, checked_picture((90, 90, 90)), "Another long one.", max_tokens=4000))
        task = asyncio.ensure_future(job.collect())
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    generated = run(leave_at_first_token())
    run(leave_at_once())
    assert backend.batch is not None
    wait_until(lambda: backend.batch is not None and backend.batch.rows == 0 and engine.queue.running == 0)
    assert model.holding == 0
    assert backend.tokens_generated - generated < 4000  # it stopped; it did not run to its cap
    (after,) = complete(engine, ask(engine, RED, "Still there?"))
    assert after.finished.usage.completion_tokens == 8
