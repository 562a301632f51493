"""Every shell command in README.md runs here, section by section, the way a reader would run it.

Each README section with ``sh`` (or ``python``) blocks is one bash session: its blocks in order
(Python blocks through ``python3 -``), in a fresh HOME, with ``8096`` rewritten to a free port (and
``TINYTITAN_PORT`` set to it). ``tinytitan`` is this checkout's CLI; ``tinytitan serve`` starts in
the background and the session waits for ``/health`` (one server at a time, stopped at the end),
as a reader's "in another terminal" would. What cannot run here is replaced by a recorder that
writes its arguments down, and the section's check looks at them — each for a stated reason:

- ``python3 -m pip …``, ``sudo apt-get …``, ``npm install …``, ``aider-install``: they install
  from the network (there is none here) and would replace the environment under test; the check
  asserts the extras and packages they name exist.
- ``python3 -m pytest``: the suite itself (``.ci/run`` runs that line verbatim; asserted below).
- ``mlx.launch``: it starts one server per machine of a hostfile (several machines, ssh); the
  check parses the ``tinytitan serve`` command each line launches with the real app, and
  tests/engine/distributed runs a launched group for real.
- ``aider``: not among the pinned client CLIs (tests/clients pins Claude Code, Codex, pi and
  OpenCode), so its command line is recorded and checked.

Claude Code, Codex, pi and OpenCode are the pinned CLIs from ``tests/clients/node_modules/.bin`` and
really run (through ``tinytitan launch``) against a ``--stub`` server that answers as the default
model's id; a missing CLI skips (fails under ``CI=true``). Model sections serve the real tiny model,
placed where the README's commands look for it (the Hugging Face cache, offline; ``~/models``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest

from tinytitan.testing.missing import missing

ROOT = Path(__file__).resolve().parents[1]
CLIENT_BIN = ROOT / "tests" / "clients" / "node_modules" / ".bin"
SERVED = "Qwen3-0.6B-4bit"  # the default model's id, which the README's client settings name
OFFLINE = "SmolLM2-135M-Instruct"  # what the default serves offline (the embedded model)
REPLY = "Hi from TinyTitan."
STUB = {"model": SERVED, "context_window": 32768, "rules": [{"reply": {"text": REPLY}}]}


# --- reading the README ----------------------------------------------------------------------------


@dataclass
class Section:
    title: str
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (language, text)

    def script(self, port: int) -> str:
        parts = []
        for language, text in self.blocks:
            text = text.replace("8096", str(port))
            if language == "python":
                parts.append(f"python3 - <<'TINYTITAN_PY'\n{text}TINYTITAN_PY")
            else:
                parts.append(text)
        return "\n".join(parts) + "\n"


def readme_sections() -> dict[str, Section]:
    """The sections (## and ### titles) holding sh / python blocks, in order."""
    sections: dict[str, Section] = {}
    title, language = "", None
    lines: list[str] = []
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines(keepends=True):
        if language is None and (heading := re.match(r"#{2,3} (.+)", line)):
            title = heading.group(1).strip()
        elif language is None and (fence := re.match(r"```(\w*)", line)):
            language, lines = fence.group(1), []
        elif language is not None and line.startswith("```"):
            if language in ("sh", "bash", "python"):
                sections.setdefault(title, Section(title)).blocks.append((language, "".join(lines)))
            language = None
        elif language is not None:
            lines.append(line)
    return sections


# --- running a section -----------------------------------------------------------------------------

PRELUDE = r"""
set -o pipefail
record() { printf '%s\n' "$*" >> "$TT_RECORD"; }
python3() {
    if [[ "$1" == -m && ( "$2" == pip || "$2" == pytest ) ]]; then record "python3 $*"; else command python3 "$@"; fi
}
sudo() { record "sudo $*"; }
npm() { record "npm $*"; }
aider-install() { record "aider-install $*"; }
mlx.launch() { record "mlx.launch $*"; }
aider() { record "aider $*"; }
_tt_pid=""
_tt_stop() { if [[ -n "$_tt_pid" ]]; then kill "$_tt_pid" 2>/dev/null; wait "$_tt_pid" 2>/dev/null; _tt_pid=""; fi; }
trap _tt_stop EXIT
tinytitan() {
    if [[ "$1" != serve ]]; then command tinytitan "$@"; return; fi
    _tt_stop
    command tinytitan "$@" > "$TT_SERVER_LOG" 2>&1 &
    _tt_pid=$!
    local i
    for (( i = 0; i < 1500; i++ )); do
        # its own banner first: a server the test started for the section may hold the port
        if grep -q "TinyTitan serving" "$TT_SERVER_LOG" \
            && curl -sf "http://127.0.0.1:$TINYTITAN_PORT/health" > /dev/null; then
            echo "serving: $(curl -s "http://127.0.0.1:$TINYTITAN_PORT/v1/models" | jq -r '.data[0].id')"
            return 0
        fi
        if ! kill -0 "$_tt_pid" 2>/dev/null; then
            wait "$_tt_pid"; local rc=$?; _tt_pid=""; cat "$TT_SERVER_LOG"; return $rc
        fi
        sleep 0.2
    done
    echo "tinytitan serve did not answer /health"; cat "$TT_SERVER_LOG"; return 1
}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Run:
    output: str
    returncode: int
    home: Path
    recorded: list[str]


def _hub_cache(root: Path, model: Path | None) -> Path:
    """A Hugging Face cache holding ``model`` as the default repo (or nothing)."""
    hub = root / "hub"
    if model is not None:
        repo = hub / "models--mlx-community--Qwen3-0.6B-4bit"
        snapshot = repo / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        for item in model.iterdir():
            (snapshot / item.name).symlink_to(item)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
    hub.mkdir(exist_ok=True)
    return hub


def run_section(
    section: Section,
    tmp: Path,
    *,
    model: Path | None = None,
    stub_server: bool = False,
    in_checkout: bool = False,
    stdin: str = "",
    serve_elsewhere: bool = False,
    served: str = SERVED,
) -> Run:
    """Run the section's blocks as one bash session; ``model``: serve the tiny model for the default;
    ``in_checkout``: in the repository (its commands name files of the checkout), else a scratch dir;
    ``serve_elsewhere``: the section's ``tinytitan serve`` listens on another port than the stub server;
    ``served``: the id the stub answers as."""
    home, work, bin_dir = tmp / "home", tmp / "work", tmp / "bin"
    for d in (home, work, bin_dir):
        d.mkdir(parents=True)
    shim = bin_dir / "tinytitan"
    shim.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from tinytitan.cli.app import main\nmain()\n"
    )
    shim.chmod(0o755)
    (work / "script.json").write_text(json.dumps({**STUB, "model": served}))
    if model is not None:
        local = home / "models" / "Qwen3-0.6B"  # a directory of its own name (its files linked)
        local.mkdir(parents=True)
        for item in model.iterdir():
            (local / item.name).symlink_to(item)
    port = _free_port()
    env = {
        "PATH": os.pathsep.join([str(bin_dir), str(CLIENT_BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": str(tmp),
        "CI": "true",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(_hub_cache(tmp, model)),
        "TINYTITAN_PORT": str(port),
        "TINYTITAN_CACHE_DIR": os.environ.get("TINYTITAN_CACHE_DIR") or str(Path.home() / ".cache" / "tinytitan"),
        "TINYTITAN_OPENBLAS": os.environ.get("TINYTITAN_OPENBLAS", ""),
        "TINYTITAN_DEVICE_CHECK": os.environ.get("TINYTITAN_DEVICE_CHECK", "1"),  # the suite runs with it on
        "TT_RECORD": str(tmp / "recorded"),
        "TT_SERVER_LOG": str(tmp / "server.log"),
    }
    if model is None and not stub_server:
        env["TINYTITAN_STUB"] = str(work / "script.json")  # `tinytitan serve` answers as the default model
    background = None
    if stub_server:  # the section talks to a server it does not start itself
        background = subprocess.Popen(
            [str(shim), "serve", "--stub", str(work / "script.json"), "--port", str(port)],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_health(port, background)
    if serve_elsewhere:
        env["TINYTITAN_PORT"] = str(_free_port())
    try:
        done = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", PRELUDE + section.script(port)],
            env=env,
            cwd=ROOT if in_checkout else work,
            capture_output=True,
            text=True,
            timeout=600,
            input=stdin,
        )
    finally:
        if background is not None:
            background.terminate()
            background.wait(timeout=30)
    recorded_file = tmp / "recorded"
    recorded = recorded_file.read_text().splitlines() if recorded_file.exists() else []
    return Run(done.stdout + done.stderr, done.returncode, home, recorded)


def _wait_health(port: int, process: subprocess.Popen[bytes]) -> None:
    import httpx

    from tinytitan.testing.waiting import wait_until

    def up() -> bool:
        assert process.poll() is None, "the stub server exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, limit=120, what="for the stub server")


def _client(name: str) -> None:
    if (CLIENT_BIN / name).exists():
        return
    missing(f"{name} CLI not installed (run: npm ci --prefix tests/clients)")


# --- what each section must show ---------------------------------------------------------------


def _extras(recorded: list[str]) -> set[str]:
    """The extras named by the recorded pip installs of this checkout (".[mlx,cpu]")."""
    found: set[str] = set()
    for line in recorded:
        for group in re.findall(r"\.\[([a-z,]+)\]", line):
            found |= set(group.split(","))
    return found


def _pyproject_extras() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["project"]["optional-dependencies"])


def check_quick_start(run: Run) -> None:
    """The first command installs (in a virtual environment) and serves; each platform's line names
    existing extras; ``tinytitan chat`` then talks to the server."""
    assert run.output.count(f"serving: {SERVED}") == 3, run.output  # each platform's line started it
    assert (run.home.parent / "work" / ".venv" / "bin" / "activate").is_file()  # python3 -m venv ran
    assert _extras(run.recorded) == {"mlx", "cpu"} and any("mlx[cuda]" in line for line in run.recorded)
    first = next(iter(readme_sections().values())).blocks[0][1].strip()
    assert first.startswith("python3 -m venv .venv") and first.endswith("&& tinytitan serve")
    assert "Traceback" not in run.output


def check_tests(run: Run) -> None:
    assert _extras(run.recorded) == {"mlx", "cpu", "vision", "test"} and _extras(run.recorded) <= _pyproject_extras()
    assert any("-m pytest" in line for line in run.recorded)
    suite = readme_sections()["Tests and CI"].blocks[0][1].strip()
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith(suite)  # CI runs the README's line verbatim


def check_contracts(run: Run) -> None:
    """The contract tests the section names exist, and the packages it says are bounded are."""
    (line,) = [line for line in run.recorded if "-m pytest" in line]
    files = re.findall(r"tests/\S+\.py", line)
    assert {"tests/engine/test_mlx_lm_adapter.py", "tests/api/test_transport.py"} <= set(files)
    assert all((ROOT / f).is_file() for f in files)
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [*data["project"]["dependencies"], *data["project"]["optional-dependencies"]["mlx"]]
    bounded = {re.split(r"[<>=\[ ]", r, maxsplit=1)[0] for r in requirements if "<" in r}
    assert {"mlx-lm", "mlx", "uvicorn", "litestar"} <= bounded


def check_platform(run: Run) -> None:
    assert run.output.splitlines()[0].startswith("tinytitan "), run.output  # --version ran
    assert "engine: mlx on " in run.output and "mlx-lm " in run.output
    assert _extras(run.recorded) <= _pyproject_extras()
    for line in run.recorded:
        for extra in re.findall(r"mlx\[([a-z0-9]+)\]", line):  # mlx's own extras (cuda, cpu)
            requires = metadata.requires("mlx") or []
            assert any(f'extra == "{extra}"' in r for r in requires), extra


def check_completion(run: Run) -> None:
    share = run.home / ".local" / "share" / "bash-completion" / "completions" / "tinytitan"
    assert share.read_text() == (ROOT / "completions" / "tinytitan.bash").read_text()
    assert (run.home / ".zfunc" / "_tinytitan").read_text() == (ROOT / "completions" / "_tinytitan").read_text()
    fish = run.home / ".config" / "fish" / "completions" / "tinytitan.fish"
    assert fish.read_text() == (ROOT / "completions" / "tinytitan.fish").read_text()
    assert "tinytitan - a local LLM server" in run.output  # man -l rendered the page


def check_serving(run: Run) -> None:
    assert run.output.count("serving: ") == 3, run.output
    assert "serving: Qwen3-0.6B\n" in run.output and f"serving: {SERVED}\n" in run.output


def check_catalog(run: Run) -> None:
    served = [line for line in run.output.splitlines() if line.startswith("serving: ")]
    assert len(served) == 3, run.output  # each catalog came up (its first id shown)
    assert run.output.count("Qwen3-0.6B") >= 6  # the tables list the models
    assert f"removed mlx-community/{SERVED}" in run.output  # rm, confirmed with y


def check_distributed(run: Run) -> None:
    import shlex

    import typer.main

    from tinytitan.cli.app import app

    launched = [line for line in run.recorded if line.startswith("mlx.launch ")]
    assert len(launched) == 3, run.recorded
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    for line in launched:
        words = shlex.split(line.split(" -- ", 1)[1])
        assert words[:2] == ["tinytitan", "serve"], line
        context = serve.make_context("serve", words[2:])  # a bad option would raise a usage error
        assert context.params["model"], line
    assert shutil.which("mlx.launch"), "mlx installs the mlx.launch launcher the README names"


def check_first_steps(run: Run) -> None:
    assert run.output.count(f"{SERVED}\n") >= 2, run.output  # the banner's id, then curl | jq


def check_reply(run: Run) -> None:
    assert REPLY in run.output, run.output


def check_launch(run: Run) -> None:
    """The agent answered through ``tinytitan launch`` (its install line recorded, not run)."""
    assert REPLY in run.output, run.output
    assert any(line.startswith("npm install -g ") for line in run.recorded), run.recorded


def check_aider(run: Run) -> None:
    assert any(line.startswith(f"aider --model openai/{SERVED} ") for line in run.recorded)
    assert "python3 -m pip install aider-install" in run.recorded


def check_troubleshooting(run: Run) -> None:
    assert "model 'mlx-community/Qwen3-0.6B-4bit' is not in the Hugging Face cache" in run.output
    assert (
        "and the hub is offline (HF_HUB_OFFLINE=1); unset HF_HUB_OFFLINE and run `tinytitan models pull" in run.output
    )
    quoted = (
        """"message":"model: requested model is not available: 'claude-sonnet-4-5'; """
        f"""this server serves {SERVED} (each also as <id>-fast)"}}"""
    )
    assert quoted in run.output and quoted in _readme_text()


def _readme_text() -> str:
    """The README with its line breaks and indentation folded to single spaces."""
    return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())


@dataclass(frozen=True)
class How:
    check: Callable[[Run], None]
    model: bool = False  # serve the tiny model (else `tinytitan serve` is the stub)
    stub_server: bool = False  # a stub server the section does not start itself
    client: str | None = None  # a pinned client CLI the section runs
    in_checkout: bool = False  # run in the repository root (man -l man/tinytitan.1)
    stdin: str = ""  # what the session's commands read (a confirmation)
    serve_elsewhere: bool = False  # the section's own `tinytitan serve` gets a port of its own
    served: str = SERVED  # the id the stub server answers as


HOW: dict[str, How] = {
    "Quick start": How(check_quick_start, model=True),
    "Tests and CI": How(check_tests),
    "Lifting a dependency's upper bound": How(check_contracts),
    "Apple silicon (macOS, Metal)": How(check_platform),
    "Linux with an NVIDIA GPU (mlx's CUDA build)": How(check_platform),
    "Linux CPU (BLIS or OpenBLAS)": How(check_platform),
    "Shell completion and the man page": How(check_completion, in_checkout=True),
    "Serving": How(check_serving, model=True),
    "Several models: a catalog": How(check_catalog, model=True, stdin="y\n"),
    "Across several machines (`mlx.launch`)": How(check_distributed),
    "Ten minutes to your agent on a local model": How(check_first_steps),
    "Claude Code (Anthropic Messages)": How(check_launch, stub_server=True, client="claude"),
    "Codex (OpenAI Responses)": How(check_launch, stub_server=True, client="codex"),
    "pi (OpenAI Chat Completions)": How(check_launch, stub_server=True, client="pi"),
    "OpenCode (OpenAI Chat Completions)": How(check_launch, stub_server=True, client="opencode"),
    "Aider (OpenAI Chat Completions)": How(check_aider, stub_server=True),
    # the SDK snippets read the served id: they work whatever the server serves (offline: SmolLM2)
    "The OpenAI SDK (Chat Completions and Responses)": How(check_reply, stub_server=True, served=OFFLINE),
    "The Anthropic SDK (Messages)": How(check_reply, stub_server=True, served=OFFLINE),
    "Connect a client": How(lambda run: None, stub_server=True, served=OFFLINE),  # runs without error
    # its `serve` is refused for its model, not for the stub server's port (the port is checked first)
    "Troubleshooting": How(check_troubleshooting, stub_server=True, serve_elsewhere=True),
}


def test_every_readme_section_with_commands_is_exercised() -> None:
    assert sorted(readme_sections()) == sorted(HOW), "add the new README section to HOW in tests/test_readme.py"


@pytest.fixture(scope="module")
def tiny() -> Path:
    from tinytitan.testing.tiny_model import tiny_model_dir

    return tiny_model_dir()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("title", sorted(HOW))
def test_readme_section_runs(title: str, tmp_path: Path, tiny: Path) -> None:
    section = readme_sections()[title]
    how = HOW[title]
    if how.client:
        _client(how.client)
    if not shutil.which("jq") or not shutil.which("curl"):
        pytest.fail("the README's commands use curl and jq", pytrace=False)
    model = tiny if how.model else None
    run = run_section(
        section,
        tmp_path,
        model=model,
        stub_server=how.stub_server,
        in_checkout=how.in_checkout,
        stdin=how.stdin,
        serve_elsewhere=how.serve_elsewhere,
        served=how.served,
    )
    expected_failure = title == "Troubleshooting"  # its first command is the failure it explains
    assert expected_failure or run.returncode == 0, textwrap.shorten(run.output, 4000)
    how.check(run)


def test_troubleshooting_quotes_the_servers_own_context_and_queue_errors(tmp_path: Path) -> None:
    """Provoke a full context and a full queue on a real server; the README quotes what it says."""
    import threading

    import httpx

    script = {
        "model": SERVED,
        "context_window": 64,
        "rules": [
            {"when": {"user_contains": "slow"}, "reply": {"text": "done", "prefill_ms": 15000}},
            {"reply": {"text": "ok"}},
        ],
    }
    (tmp_path / "s.json").write_text(json.dumps(script))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tinytitan", "serve", "--stub", str(tmp_path / "s.json"), "--port", str(port)]
    server = subprocess.Popen(
        [*argv, "--queue-limit", "0", "--max-concurrent", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_health(port, server)
        long = {"model": SERVED, "messages": [{"role": "user", "content": "word " * 500}]}
        full = httpx.post(f"{base}/v1/chat/completions", json=long, timeout=30).json()["error"]
        assert full["code"] == "context_length_exceeded"
        assert re.fullmatch(r"the prompt has \d+ tokens; the context window is 64", full["message"]), full
        assert re.search(r"`the prompt has \d+ tokens; the context window is \d+`", _readme_text())
        assert "`context_length_exceeded`" in _readme_text()

        slow = {"model": SERVED, "messages": [{"role": "user", "content": "slow"}]}

        def occupy() -> None:  # the slow request takes the one slot (retried if a probe held it)
            while httpx.post(f"{base}/v1/chat/completions", json=slow, timeout=60).status_code == 429:
                pass

        first = threading.Thread(target=occupy)
        first.start()
        try:
            from tinytitan.testing.waiting import wait_until

            def running() -> bool:  # the stub records a request once it is admitted and validated
                return '"slow"' in httpx.get(f"{base}/_stub/requests", timeout=30).text

            wait_until(running, limit=30, what="for the slow request to run")
            quick = {"model": SERVED, "messages": [{"role": "user", "content": "hi"}]}
            chat = httpx.post(f"{base}/v1/chat/completions", json=quick, timeout=30)
            messages = {**quick, "max_tokens": 16}
            anthropic = httpx.post(f"{base}/v1/messages", json=messages, timeout=30)
        finally:
            first.join()
        assert chat.status_code == 429 and chat.headers["retry-after"] == "1"
        assert anthropic.status_code == 529 and anthropic.json()["error"]["type"] == "overloaded_error"
        readme = _readme_text()
        assert f"429 `{chat.json()['error']['message']}`" in readme
        assert f"529 `overloaded_error` (`{anthropic.json()['error']['message']}`)" in readme
        assert "`Retry-After: 1`" in readme
    finally:
        server.terminate()
        server.wait(timeout=30)
