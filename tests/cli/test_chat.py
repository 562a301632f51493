"""``tinytitan chat`` as a user runs it: in a real pseudo-terminal, and with a piped stdin.

The terminal tests drive ``python -m tinytitan chat`` through pexpect against ``serve --stub`` in
its own process (its ``/_stub/requests`` shows what the chat sent), and once against the tiny real
model in-process (Ctrl-C mid-answer must not abort the process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from tinytitan.engine.passes.compaction import HANDOVER_ASK
from tinytitan.testing.process import REPO_ROOT, ServerProcess, free_port, serve_stub_process
from tinytitan.testing.scripts import script
from tinytitan.testing.terminal import PROMPT, plain, spawn_chat

SLOW = " ".join(f"w{i}" for i in range(400))  # 400 deltas, 150 ms apart: a minute unless stopped
NOTE = "Handover: the user asked about apples."
CODE_ANSWER = "Here it is:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nDone."

PARAGRAPH = "The fox went down to the river, looked at the water and went home again. "
RULES: list[dict[str, Any]] = [
    {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE, "chunk_delay_ms": 250}},  # 2-3 s
    {"when": {"user_contains": "story"}, "reply": {"text": PARAGRAPH * 3000, "chunk_delay_ms": 5}},
    {"when": {"user_contains": "slowly"}, "reply": {"text": SLOW, "chunk_delay_ms": 150}},
    {"when": {"user_contains": "code"}, "reply": {"reasoning": "Code wanted.", "text": CODE_ANSWER}},
    {"when": {"user_contains": "apples"}, "reply": {"text": "Apples are red."}},
    {"reply": {"text": "hello from tinytitan"}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with serve_stub_process(script(*RULES)) as proc:
        yield proc


def _requests(server: ServerProcess) -> list[dict[str, Any]]:
    return list(httpx.get(server.url + "/_stub/requests", timeout=10).json())


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def _chat(server: ServerProcess, tmp_path: Path, *args: str) -> Any:
    child = spawn_chat("--url", server.url, *args, data_home=tmp_path / "data", cwd=tmp_path)
    child.expect_exact("TinyTitan chat")
    child.expect_exact(PROMPT)
    return child


def _ask(child: Any, text: str) -> str:
    """Send a message, wait for the answer's usage line and the next prompt; the answer's text."""
    child.sendline(text)
    child.expect(r"\d+ tokens · ")
    answer = plain(child.before)
    child.expect_exact(PROMPT)
    return answer


def _leave(child: Any) -> int:
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus)


def test_two_turns_then_ctrl_d_exits_0(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    assert "hello from tinytitan" in _ask(child, "hi there")
    assert "Apples are red." in _ask(child, "and apples?")
    assert _leave(child) == 0
    last = _requests(server)[-1]
    assert _user_texts(last) == ["hi there", "and apples?"]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]
    assert last["stream"] is True


def test_the_answer_cap_is_shown_and_a_looping_answer_is_stopped(server: ServerProcess, tmp_path: Path) -> None:
    """The chat caps answers at 2,048 tokens by default (the banner says so); an answer that repeats
    one paragraph without end is stopped after a few copies, with one line saying why."""
    child = spawn_chat("--url", server.url, data_home=tmp_path / "data", cwd=tmp_path)
    child.expect_exact("answers up to 2,048 tokens (/max-tokens changes it)")
    child.expect_exact(PROMPT)
    child.sendline("tell me a long story")
    child.expect_exact(f"stopped: the answer kept repeating the same {len(PARAGRAPH)} characters")
    child.expect_exact(PROMPT)
    assert "hello from tinytitan" in _ask(child, "hi")
    assert _leave(child) == 0
    story, hi = _requests(server)[-2:]
    assert story["max_new"] == 2048
    assert hi["messages"][1]["role"] == "assistant" and hi["messages"][1]["content"].count("looked at the water") == 1


def test_ctrl_c_mid_answer_keeps_the_conversation(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    child.sendline("count slowly")
    child.expect_exact("w3 ")  # the answer is streaming
    child.sendintr()
    child.expect_exact("stopped (the conversation is kept)")
    child.expect_exact(PROMPT)
    assert "Apples are red." in _ask(child, "now apples")
    assert _leave(child) == 0
    last = _requests(server)[-1]
    assert _user_texts(last) == ["count slowly", "now apples"]
    partial = last["messages"][1]
    assert partial["role"] == "assistant" and partial["content"].startswith("w0 w1 w2 w3")
    assert len(partial["content"]) < len(SLOW)  # stopped: the rest was never generated


def test_clear_starts_a_new_conversation(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path, "--system", "be brief")
    _ask(child, "first question")
    child.sendline("/clear")
    child.expect_exact("new conversation")
    child.expect_exact(PROMPT)
    _ask(child, "second question")
    assert _leave(child) == 0
    last = _requests(server)[-1]
    assert _user_texts(last) == ["second question"] and last["system"] == "be brief"


def test_ctrl_c_at_the_prompt_clears_the_line(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    child.send("half a thought")
    child.expect_exact("half a thought")  # the editor has the keys
    child.sendintr()
    _ask(child, "apples")
    assert _user_texts(_requests(server)[-1]) == ["apples"]
    child.sendintr()  # on an empty line: a hint, then a second one leaves
    child.expect_exact("Ctrl-C again")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_save_then_compact_and_load(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    _ask(child, "tell me about apples")
    child.sendline("/save session.json")
    child.expect_exact("saved 2 items")
    child.expect_exact(PROMPT)
    assert _leave(child) == 0
    saved = json.loads((tmp_path / "session.json").read_text())
    assert saved["model"] == "stub-model" and saved["store"] is False
    assert [i["type"] for i in saved["input"]] == ["message", "message"]

    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script(*RULES)))
    compacted = subprocess.run(
        [sys.executable, "-m", "tinytitan", "compact", str(tmp_path / "session.json"), "--stub", str(stub)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compacted.returncode == 0, compacted.stderr
    assert compacted.stdout.strip() == NOTE

    child = _chat(server, tmp_path)
    child.sendline("/load session.json")
    child.expect_exact("loaded 2 items (1 turn)")
    child.expect_exact(PROMPT)
    child.sendline("/compact")
    child.expect(r"compacting… \d+ s \(Ctrl-C stops\)")  # the seconds count while the server works
    child.expect(r"compacting: \d+\.\d s")
    child.expect_exact("compacted 2 items into a note")
    child.expect_exact(PROMPT)
    _ask(child, "what next?")
    assert _leave(child) == 0
    last = _requests(server)[-1]
    assert _user_texts(last) == ["what next?"] and NOTE in (last["system"] or "")


def test_history_recall_with_up_in_a_new_session(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    _ask(child, "remember this line")
    assert _leave(child) == 0
    assert "remember this line" in (tmp_path / "data" / "tinytitan" / "chat_history").read_text()

    child = _chat(server, tmp_path)
    child.send("\x1b[A")  # Up
    child.expect_exact("remember this line")
    child.send("\r")
    child.expect(r"\d+ tokens · ")
    child.expect_exact(PROMPT)
    assert _leave(child) == 0
    assert _user_texts(_requests(server)[-1]) == ["remember this line"]


def test_multi_line_input_with_a_continuation(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    child.send("line one\\\r")
    child.send("line two\r")
    child.expect(r"\d+ tokens · ")
    child.expect_exact(PROMPT)
    assert _leave(child) == 0
    assert _user_texts(_requests(server)[-1]) == ["line one\nline two"]


def test_a_markdown_answer_is_rendered(server: ServerProcess, tmp_path: Path) -> None:
    child = _chat(server, tmp_path)
    answer = _ask(child, "write code")
    final = answer.rsplit("thought (2 words): Code wanted.", 1)[1]  # after the live region was cleared
    assert "def add(a, b):" in final and "```" not in final  # the fence is rendered, not shown
    assert _leave(child) == 0


def test_server_gone_is_one_red_line_and_the_session_goes_on(tmp_path: Path) -> None:
    with serve_stub_process(script()) as proc:
        child = _chat(proc, tmp_path)
        proc.process.terminate()
        proc.process.wait(timeout=10)
        child.sendline("anyone there?")
        child.expect_exact("error: cannot reach the server")
        child.expect_exact(PROMPT)
        child.sendline("/help")
        child.expect_exact("/compact")
        child.expect_exact(PROMPT)
        assert _leave(child) == 0


# -- pipe mode ----------------------------------------------------------------------------------


def _pipe(*args: str, stdin: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "chat", *args],
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_pipe_mode_prints_exactly_the_answers(server: ServerProcess) -> None:
    result = _pipe("--url", server.url, stdin="hi\n\ntell me about apples\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from tinytitan\n\nApples are red.\n"  # a blank line between answers
    last = _requests(server)[-1]
    assert _user_texts(last) == ["hi", "tell me about apples"]


def test_pipe_mode_with_a_server_down_is_one_line_and_exit_2() -> None:
    result = _pipe("--url", f"http://127.0.0.1:{free_port()}", stdin="hi\n")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot reach the server" in result.stderr


def test_pipe_mode_error_is_a_line_and_the_session_goes_on(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script(context_window=64)))
    result = _pipe("--stub", str(stub), stdin="word " * 100 + "\nhi\n")
    assert result.returncode == 1
    assert result.stdout == "hello from tinytitan\n"
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1


def test_tools_are_not_offered_to_a_model_without_a_tool_call_syntax(server: ServerProcess) -> None:
    """The chat reads the fact from /v1/models?details=true, says so once and sends no tools."""
    result = _pipe("--url", server.url, "--tools", stdin="hi\n")
    assert result.returncode == 0 and _requests(server)[-1]["tools"] != []  # the stub model can call tools
    with serve_stub_process(script(*RULES, tool_calls=False)) as plain_model:
        result = _pipe("--url", plain_model.url, "--tools", stdin="hi\nhello\n")
        assert (
            result.returncode == 0 and result.stdout == "hello from tinytitan\n\nhello from tinytitan\n"
        )  # answers apart by a blank line
        assert result.stderr.count("has no tool-call syntax; --tools is off") == 1
        assert [r["tools"] for r in _requests(plain_model)] == [[], []]


def test_pipe_mode_with_memory_in_process_remembers_under_the_chat_directory(tmp_path: Path) -> None:
    from tinytitan.engine.memory.journal import read_journal
    from tinytitan.engine.memory.scope import workspace_id

    rules: list[dict[str, Any]] = [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": "I will remember that."}},
        {"reply": {"tool_calls": [{"name": "memory_set", "arguments": {"key": "user/pet", "value": "a cat"}}]}},
    ]
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script(*rules)))
    project = tmp_path / "project"
    project.mkdir()
    memory = tmp_path / "memory"
    result = _pipe("--stub", str(stub), "--memory", "--memory-dir", str(memory), stdin="I have a cat\n", cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "I will remember that.\n"
    (where,) = memory.glob(f"tinytitan/*/{workspace_id(str(project))}")
    assert read_journal(where).records["user/pet"].value == "a cat"


# -- the tiny real model, in-process ------------------------------------------------------------


def test_ctrl_c_while_the_fast_cpu_reexec_starts_python_ends_quietly(tmp_path: Path) -> None:
    """A Ctrl-C pressed while the re-executed interpreter imports ``site`` (``tinytitan chat`` re-execs
    with a faster BLAS before loading a model) once aborted it: "Fatal Python error: init_import_site".
    A ``sitecustomize`` that presses it at exactly that moment: the chat ends quietly with 130."""
    from tinytitan.cpu_blas import REEXEC_ENV
    from tinytitan.testing.tiny_model import tiny_model_dir

    pressed = tmp_path / "pressed"
    (tmp_path / "sitecustomize.py").write_text(  # Ctrl-C as at a terminal (a shell's background job ignores it)
        f"import os, signal\nif os.environ.get({REEXEC_ENV!r}):\n"
        "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"    open({str(pressed)!r}, 'w').close()\n    os.kill(os.getpid(), signal.SIGINT)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tinytitan", "chat", "--model", str(tiny_model_dir())],
        input="hi\n",
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not pressed.exists():
        pytest.skip("the chat does not re-exec on this machine (no BLIS or OpenBLAS to preload)")
    assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


def test_ctrl_c_with_a_real_model_in_process_keeps_the_session(tmp_path: Path) -> None:
    from tinytitan.testing.tiny_model import tiny_model_dir

    model = tiny_model_dir()
    child = spawn_chat(
        "--model", str(model), "--max-tokens", "4000", data_home=tmp_path / "data", cwd=tmp_path, timeout=180
    )
    child.expect_exact("in-process (loaded here)")
    child.expect_exact(PROMPT)
    _send_and_wait_for_streamed_text(child, "tell me a long story")
    child.sendintr()
    child.sendintr()  # an impatient second Ctrl-C must not abort either
    child.expect_exact("stopped (the conversation is kept)")
    child.expect_exact(PROMPT)
    child.sendline("/save s1.json")  # the interrupted turn is in the history
    child.expect_exact("saved 2 items")
    child.expect_exact(PROMPT)
    _send_and_wait_for_streamed_text(child, "and then?")  # a cached prompt: text may come before any spinner
    child.sendintr()
    child.expect_exact(PROMPT)
    child.sendline("/save s2.json")
    child.expect_exact("saved 4 items")
    child.expect_exact(PROMPT)
    assert _leave(child) == 0
    output = plain(child.before or "")
    assert "terminate called" not in output and "Traceback" not in output
    texts = [i["content"][0]["text"] for i in json.loads((tmp_path / "s2.json").read_text())["input"]]
    assert texts[0] == "tell me a long story" and texts[2] == "and then?"
    assert texts[1] and texts[3]  # the parts of the answers that were shown


def _send_and_wait_for_streamed_text(child: Any, line: str, chars: int = 30) -> None:
    """Send a message and wait until the live region shows model text (not the spinner, not the echo).

    The spinner shows only when no text came before the live region's first refresh, so it is not
    waited for. prompt_toolkit turns bracketed paste off once it has accepted the line: what follows
    is the turn's output.
    """
    child.sendline(line)
    child.expect_exact("\x1b[?2004l")
    seen = ""
    while len(seen.replace("waitingforthemodel", "")) < chars:
        child.expect(r".+")
        seen += "".join(c for c in plain(child.after) if c.isalnum())
