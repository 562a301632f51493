"""Real clients against the embedded SmolLM2 (8,192-token context) served from its GGUF file (issue 12).

pi (Chat Completions) says hi and prints the model's own (sampled) words, from one request that
ends by the model's end-of-turn. Claude Code and Codex are not run here: SmolLM2's template leaves tools out, so their
prompts fit the context, and the model then writes until the context cap (minutes on this CPU).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .conftest import Pi, StubServer


@pytest.mark.timeout(700)
def test_pi_says_hi_with_the_real_model(real_model: StubServer, pi: Pi) -> None:
    pi.ws.timeout = 600
    run = pi.run(real_model, "say hi")
    assert run.returncode == 0, run.describe()
    assert re.search(r"\w{2,}", run.stdout), run.describe()  # the model's own words (sampled: any words)
    posts = [line for line in real_model.access_log().splitlines() if "POST /v1/chat/completions" in line]
    assert len(posts) == 1 and posts[0].endswith("200 OK"), posts
