"""Real clients against the embedded SmolLM2 (8,192-token context) served from its GGUF file (issue 12).

pi (Chat Completions) says hi and prints the model's own (sampled) words, from one request that
ends by the model's end-of-turn or by the 200-token cap pi's models.json gives it, as a user would
for a small model: uncapped, a sampled SmolLM2 answer sometimes ran for the whole 8k window (over
pi's 600 s here, once in a full-suite run). Claude Code and Codex, served a window smaller than
their base prompts, get the context error in their protocol's envelope and report it. (With the
full 8k window their prompts fit — the template leaves tools out — and SmolLM2 answers them, but a
sampled answer of unbounded length makes that a minutes-long, nondeterministic run: Claude Code
fails a turn its own output cap cuts short.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import StubServer, _start, _stop

if TYPE_CHECKING:
    from .conftest import Claude, Codex, Pi


MAX_TOKENS = 200  # pi's own cap for the model (models.json): SmolLM2 may ramble for the whole window


@pytest.mark.timeout(700)
def test_pi_says_hi_with_the_real_model(real_model: StubServer, pi: Pi) -> None:
    pi.ws.timeout = 600
    run = pi.run(real_model, "say hi", model_fields={"maxTokens": MAX_TOKENS})
    assert run.returncode == 0, run.describe()
    assert re.search(r"\w{2,}", run.stdout), run.describe()  # the model's own words (sampled: any words)
    posts = [line for line in real_model.access_log().splitlines() if "POST /v1/chat/completions" in line]
    assert len(posts) == 1 and posts[0].endswith("200 OK"), posts


@pytest.fixture(scope="module")
def small_window(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubServer]:
    """The embedded model with a 2,048-token window: Codex's and Claude Code's base prompts are larger."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    directory = tmp_path_factory.mktemp("small-window")
    args = ["--model", str(embedded_gguf()), "--model-id", "smollm2", "--max-context", "2048"]
    proc, server = _start(args, directory, "smollm2")
    yield server
    _stop(proc)


def test_codex_gets_the_context_error_in_its_envelope(small_window: StubServer, codex: Codex) -> None:
    """A client whose prompt is larger than the model's window gets the context error in its protocol's
    envelope (a Responses 400 ``context_length_exceeded``) and reports it; nothing is generated."""
    run = codex.run(small_window, "say hi")
    assert run.returncode != 0, run.describe()
    assert "context window" in run.stdout + run.stderr, run.describe()
    posts = [line for line in small_window.access_log().splitlines() if "POST /v1/responses" in line]
    assert posts and all("400 Bad Request" in p for p in posts), posts
    direct = httpx.post(small_window.v1 + "/responses", json={"model": "smollm2", "input": "word " * 3000}, timeout=120)
    error = direct.json()["error"]
    assert direct.status_code == 400 and (error["code"], error["param"]) == ("context_length_exceeded", "input")


def test_claude_code_gets_the_context_error_in_its_envelope(small_window: StubServer, claude: Claude) -> None:
    """The same on Messages: a 400 ``invalid_request_error`` in the API's own words ("prompt is too long:
    N tokens > M maximum"), which Claude Code reads as its prompt-too-long case and reports with our limit."""
    run = claude.run(small_window, "say hi")
    (result,) = [e for e in run.json_lines() if e.get("type") == "result"]
    assert result["is_error"] is True and result.get("terminal_reason") == "prompt_too_long", run.describe()
    assert "limit 2048" in result["result"], run.describe()
    posts = [line for line in small_window.access_log().splitlines() if "POST /v1/messages" in line]
    assert posts and all("400 Bad Request" in p for p in posts), posts
