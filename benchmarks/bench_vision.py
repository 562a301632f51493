"""Images on the one path: what a picture costs the first token, and image requests batched (issue 41).

    python benchmarks/bench_vision.py [--shape tiny] [--rounds 3] [--tokens 32]

On the tiny random vision model (``tiny_model --vision``: Idefics3 through mlx-vlm; a 100 × 50
picture is two 64-pixel tiles and the global view, 12 image tokens), in process through the Engine:

- time to first token of a one-image request against the same prompt without the picture (the
  prompt cache emptied before each; the median of ``--rounds``), and their ratio;
- 4 concurrent image requests (four different pictures, ``--max-concurrent 4``) against one: the
  aggregate generated tokens a second of the four and of the one, and their ratio — beside the same
  ratio for text requests (what batching gives this model without pictures).

Not part of the test run; on a busy machine the times are noise (print the load average beside them).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from tinytitan.engine.events import TextDelta  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import ChatRequest, Image, Message, Sampling  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.images import checked_picture, image_message  # noqa: E402
from tinytitan.testing.loop import run  # noqa: E402
from tinytitan.testing.tiny_vision import tiny_vision_dir  # noqa: E402

TEXT = "Describe what this screenshot shows, then say which button to press next."


def _request(engine: Engine, image: Image | None, tokens: int) -> ChatRequest:
    message = image_message(image, TEXT) if image is not None else Message("user", TEXT)
    return ChatRequest(model=engine.info.id, messages=(message,), max_tokens=tokens, sampling=Sampling(temperature=0))


async def _first_token(engine: Engine, request: ChatRequest) -> float:
    began = time.perf_counter()
    job = await engine.prepare(request)
    async for event in job.events():
        if isinstance(event, TextDelta):
            job.close()
            break
    return time.perf_counter() - began


async def _generated(engine: Engine, requests: list[ChatRequest]) -> tuple[int, float]:
    began = time.perf_counter()
    done = await asyncio.gather(*(engine.complete(r) for r in requests))
    return sum(c.finished.usage.completion_tokens for c in done), time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="tiny")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32, help="tokens each request of the batch part generates")
    args = parser.parse_args()
    backend = MlxBackend(str(tiny_vision_dir(args.shape)), max_concurrent=4)
    engine = Engine(backend)

    def cold() -> None:
        backend.prompt_cache.clear(backend.identity)

    try:
        run(_first_token(engine, _request(engine, checked_picture((1, 1, 1)), 1)))  # load and warm up
        with_image, without = [], []
        for i in range(args.rounds):
            cold()
            with_image.append(run(_first_token(engine, _request(engine, checked_picture((i, 100, 200)), 1))))
            cold()
            without.append(run(_first_token(engine, _request(engine, None, 1))))
        image_s, text_s = statistics.median(with_image), statistics.median(without)
        print(f"time to first token: one image {image_s * 1000:.1f} ms, no image {text_s * 1000:.1f} ms")
        print(f"  ratio (image / text): {image_s / text_s:.2f}x")
        cold()
        one, one_s = run(_generated(engine, [_request(engine, checked_picture((5, 5, 5)), args.tokens)]))
        cold()
        four = [_request(engine, checked_picture((40 * k, 60, 90)), args.tokens) for k in range(4)]
        many, many_s = run(_generated(engine, four))
        assert backend.batch is not None
        print(f"one image request: {one / one_s:.1f} tokens/s; 4 concurrent: {many / many_s:.1f} tokens/s aggregate")
        ratio = (many / many_s) / (one / one_s)
        print(f"  ratio (4 concurrent / one): {ratio:.2f}x (peak rows {backend.batch.peak_rows})")
        cold()
        text_one, text_one_s = run(_generated(engine, [_request(engine, None, args.tokens)]))
        cold()
        text_many, text_many_s = run(_generated(engine, [_request(engine, None, args.tokens)] * 4))
        text_ratio = (text_many / text_many_s) / (text_one / text_one_s)
        print(f"  the same without pictures: {text_ratio:.2f}x (one {text_one / text_one_s:.1f} tokens/s)")
        print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    finally:
        engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
