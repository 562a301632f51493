"""Real clients sending pictures (issue 41) to ``serve --stub`` with a vision script: Codex attaches one
with ``codex exec -i`` (an ``input_image``), Claude Code reads a .png with its Read tool and sends it
back as an ``image`` block inside the ``tool_result``."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from tinytitan.testing.images import picture

if TYPE_CHECKING:
    from .conftest import Claude, Codex, StartStub

PNG = picture("png", 8, 6)
DIGEST = hashlib.sha256(PNG).hexdigest()


def test_codex_attaches_a_picture(stub: StartStub, codex: Codex) -> None:
    server = stub(
        {
            "vision": True,
            "rules": [
                {"when": {"image_digest": DIGEST[:16]}, "reply": {"text": "a red rectangle"}},
                {"reply": {"text": "no picture came"}},
            ],
        }
    )
    (codex.ws.work / "picture.png").write_bytes(PNG)
    run = codex.run(server, "what is in this picture?", "-i", "picture.png", "--")  # -i takes several files
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "a red rectangle", run.describe()
    last = server.requests()[-1]["messages"][-1]
    assert last["role"] == "user" and [i["digest"] for i in last["images"]] == [DIGEST]


def test_claude_code_reads_a_screenshot_with_its_read_tool(stub: StartStub, claude: Claude) -> None:
    shot = claude.ws.work / "shot.png"
    shot.write_bytes(PNG)
    server = stub(
        {
            "vision": True,
            "rules": [
                {"when": {"last_role": "tool", "image_digest": DIGEST[:16]}, "reply": {"text": "a red rectangle"}},
                {"when": {"last_role": "tool"}, "reply": {"text": "the tool result held no picture"}},
                {
                    "when": {"user_contains": "shot.png"},
                    "reply": {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(shot)}}]},
                },
            ],
        }
    )
    run = claude.run(server, "what is in shot.png?", "--dangerously-skip-permissions")
    assert run.returncode == 0, run.describe()
    assert json.loads(run.stdout)["result"] == "a red rectangle", run.describe()
    answered = [r for r in server.requests() if r["messages"][-1]["role"] == "tool"][-1]
    assert [i["digest"] for i in answered["messages"][-1]["images"]] == [DIGEST]
