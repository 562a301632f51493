"""What ``served`` reads off a server: the model, its window and output cap, whichever shape the
server publishes them in (today's ``?details=true`` facts, or fields on the model entry itself)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from tinytitan.launch.server import LaunchError, Served, served

URL = "http://127.0.0.1:9"


def _mock(router: respx.MockRouter, listing: list[dict[str, Any]], one: dict[str, Any] | None = None) -> None:
    router.get(f"{URL}/v1/models", params={"details": "true"}).respond(json={"object": "list", "data": listing})
    for entry in listing:
        router.get(f"{URL}/v1/models/{entry['id']}").respond(json=one or {"id": entry["id"], "object": "model"})
    router.get(url__regex=rf"{URL}/v1/models/.+").respond(404, json={"error": {"message": "no such model"}})


@respx.mock
def test_todays_details_give_the_window_and_a_quarter_of_it_as_the_cap() -> None:
    details = {"context_window": 8192, "reasoning_levels": ["off", "on"]}
    _mock(respx.mock, [{"id": "smollm2", "tinytitan": details}, {"id": "other", "tinytitan": {"context_window": 4}}])
    assert served(URL + "/v1/") == Served(URL, "smollm2", 8192, 2048, None, ("off", "on"))


@respx.mock
def test_fields_on_the_model_entry_win_and_a_published_cap_is_used() -> None:
    one = {"id": "m", "context_window": 65536, "max_output_tokens": 4096}
    _mock(respx.mock, [{"id": "m", "tinytitan": {"context_window": 1024}}], one)
    facts = served(URL, model="m", api_key="k")
    assert (facts.context_window, facts.output_cap, facts.key) == (65536, 4096, "k")
    assert respx.calls.last.request.headers["authorization"] == "Bearer k"


@respx.mock
def test_a_vision_model_is_read_from_its_input_modalities() -> None:
    entry = {"id": "vlm", "context_window": 8192, "input_modalities": ["text", "image"]}
    _mock(respx.mock, [entry], entry)
    assert served(URL).images is True


@respx.mock
def test_the_cap_is_at_most_32000_on_a_large_window() -> None:
    _mock(respx.mock, [{"id": "big", "tinytitan": {"context_window": 262144}}])
    assert served(URL).output_cap == 32000


@respx.mock
@pytest.mark.parametrize(
    ("key", "words"), [(None, "wants an API key: pass --api-key"), ("bad", "refused the API key given")]
)
def test_a_refused_key(key: str | None, words: str) -> None:
    respx.get(f"{URL}/v1/models").respond(401, json={"error": {"message": "missing or invalid API key"}})
    with pytest.raises(LaunchError, match=words):
        served(URL, api_key=key)


@respx.mock
def test_a_model_it_does_not_serve_and_one_without_a_window() -> None:
    _mock(respx.mock, [{"id": "m"}])
    with pytest.raises(LaunchError, match=r"does not serve 'x' \(it serves: m\)"):
        served(URL, model="x")
    with pytest.raises(LaunchError, match="does not say the context window of 'm'"):
        served(URL)


@respx.mock
def test_not_a_tinytitan_server() -> None:
    for body in ({"text": "<html>hello</html>"}, {"json": ["a", "list"]}):
        respx.get(f"{URL}/v1/models").respond(200, **body)
        with pytest.raises(LaunchError, match="not a TinyTitan server"):
            served(URL)
    respx.get(f"{URL}/v1/models").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(LaunchError, match="cannot read the models"):
        served(URL)
