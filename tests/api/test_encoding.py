"""Compressed request bodies (issue 36 item 2, ``tinytitan.api.encoding``): gzip, deflate and zstd on
every POST route, a bound on what a body decompresses to, and refusals by name — against a real
server, with a recorded Codex request (``data/README.md``) replayed compressed."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import zstandard

from tinytitan.api.encoding import decompress
from tinytitan.engine.errors import InvalidRequest, RequestTooLarge, UnsupportedMediaType
from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.websocket import open_socket

CODEX = (Path(__file__).parent / "data" / "codex_request.json").read_bytes()
LIMIT = 256 * 1024  # the body limit of this module's server: the Codex body (44 KB) fits, a bomb does not

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "zstd": lambda body: zstandard.ZstdCompressor().compress(body),
    "gzip": gzip.compress,
    "deflate": zlib.compress,
}


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    rules = [{"reply": {"text": "hello from tinytitan"}}]
    with live_server(StubBackend(script(*rules)), settings=Settings(body_limit=LIMIT)) as server:
        yield server


def post(live: LiveServer, path: str, body: bytes, encoding: str | None, **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", **headers}
    if encoding is not None:
        sent["content-encoding"] = encoding
    return httpx.post(live.url + path, content=body, headers=sent, timeout=60)


@pytest.mark.parametrize("encoding", list(COMPRESSORS))
def test_a_recorded_codex_request_compressed_is_served_as_the_plain_one(live: LiveServer, encoding: str) -> None:
    plain = post(live, "/v1/responses", CODEX, None)
    packed = COMPRESSORS[encoding](CODEX)
    assert len(packed) < len(CODEX) / 2
    answer = post(live, "/v1/responses", packed, encoding)
    assert answer.status_code == 200, answer.text
    events = [data for _, data in sse.events(answer.text)]
    assert check_stream(events)["output"][-1]["content"][0]["text"] == "hello from tinytitan"
    first, second = live.recorded[-2:]
    for field in ("system", "messages", "tools"):
        assert first[field] == second[field]  # the engine saw the same request
    assert plain.status_code == 200


def test_every_post_route_takes_a_compressed_body(live: LiveServer) -> None:
    chat = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    answer = post(live, "/v1/chat/completions", gzip.compress(json.dumps(chat).encode()), "gzip")
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hello from tinytitan"
    messages = {"model": STUB_MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    answer = post(live, "/v1/messages", COMPRESSORS["zstd"](json.dumps(messages).encode()), "zstd")
    check_messages_answer("/v1/messages", answer.status_code, answer.headers["content-type"], answer.text)
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "hello from tinytitan"
    counted = post(live, "/v1/messages/count_tokens", zlib.compress(json.dumps(messages).encode()), "deflate")
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    compact = {"model": STUB_MODEL, "input": turns}
    answer = post(live, "/v1/responses/compact", gzip.compress(json.dumps(compact).encode()), "x-gzip, identity")
    assert answer.status_code == 200 and answer.json()["object"] == "response.compaction"


def test_stacked_encodings_are_undone_last_first(live: LiveServer) -> None:
    body = json.dumps({"model": STUB_MODEL, "input": "hi"}).encode()
    answer = post(live, "/v1/responses", COMPRESSORS["zstd"](gzip.compress(body)), "gzip, zstd")
    assert answer.status_code == 200 and answer.json()["status"] == "completed"


@pytest.mark.parametrize("encoding", list(COMPRESSORS))
def test_a_zip_bomb_is_a_413_not_memory(live: LiveServer, encoding: str) -> None:
    """Ten times the limit of zeros packs to a few KB; decompression stops one byte past the limit."""
    bomb = COMPRESSORS[encoding](b"0" * (10 * LIMIT))
    assert len(bomb) < LIMIT
    answer = post(live, "/v1/responses", bomb, encoding)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "request_too_large"
    # in the Anthropic envelope on a Messages route
    answer = post(live, "/v1/messages", bomb, encoding, **{"anthropic-version": "2023-06-01"})
    assert answer.status_code == 413 and answer.json()["error"]["type"] == "request_too_large"


def test_a_compressed_body_over_the_limit_is_a_413(live: LiveServer) -> None:
    too_big = zlib.compress(random.Random(36).randbytes(LIMIT + 4096))  # noise: larger than the limit as sent
    assert len(too_big) > LIMIT
    assert post(live, "/v1/responses", too_big, "deflate").status_code == 413


def test_an_unknown_encoding_is_a_415_naming_it(live: LiveServer) -> None:
    answer = post(live, "/v1/responses", b"\x1b\x00", "br")
    assert answer.status_code == 415
    error = answer.json()["error"]
    assert error["code"] == "unsupported_content_encoding" and "'br'" in error["message"]


def test_a_body_that_is_not_its_encoding_is_a_400_naming_it(live: LiveServer) -> None:
    answer = post(live, "/v1/responses", b'{"model": "plain json"}', "gzip")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_body" and "gzip" in error["message"]


def test_decompress_refuses_by_name_and_bounds_every_decoder() -> None:
    with pytest.raises(UnsupportedMediaType, match="'compress'"):
        decompress(b"", "gzip, compress", 10)
    with pytest.raises(InvalidRequest, match="zstd"):
        decompress(b"not zstd", "zstd", 10)
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    data = raw_deflate.compress(b"x" * 100) + raw_deflate.flush()
    assert decompress(data, "deflate", 100) == b"x" * 100  # a raw deflate stream, as some clients send
    members = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(members, "gzip", 100) == b"one two"
    for encoding, pack in COMPRESSORS.items():
        assert decompress(pack(b"y" * 64), encoding, 64) == b"y" * 64  # exactly the limit: kept
        with pytest.raises(RequestTooLarge):
            decompress(pack(b"y" * 65), encoding, 64)


def test_the_websocket_negotiates_its_transports_compression(live: LiveServer) -> None:
    """A WebSocket frame has no Content-Encoding: its compression is permessage-deflate, negotiated
    with any client that offers it (the test client does, as browsers and the SDKs' do)."""
    with open_socket(live.url) as ws:
        extensions = [type(e).__name__ for e in ws.connection.protocol.extensions]
        events = ws.run(model=STUB_MODEL, input=json.loads(CODEX)["input"], store=False)
    assert extensions == ["PerMessageDeflate"]
    assert check_stream(events)["status"] == "completed"
