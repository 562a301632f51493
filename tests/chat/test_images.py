"""``tinytitan chat`` attaches pictures (issue 41.5): ``--image PATH`` with a prompt, ``/image PATH``
for the next message; a file that is missing or no picture is one line, and nothing is sent."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan.chat.client import ChatError
from tinytitan.chat.images import image_part
from tinytitan.testing.images import picture
from tinytitan.testing.process import REPO_ROOT
from tinytitan.testing.scripts import script

PNG = picture("png", 8, 6)
SEEN = f"1 image(s): image/png 8x6 {hashlib.sha256(PNG).hexdigest()[:12]}"


def _chat(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    (tmp_path / "shot.png").write_bytes(PNG)
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script({"reply": {"describe_images": True}}, vision=True)))
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "chat", "--stub", str(stub), *args],
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_image_flag_attaches_a_picture_to_the_prompt(tmp_path: Path) -> None:
    result = _chat(tmp_path, "--image", "shot.png", "what is this?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == SEEN


def test_image_command_attaches_to_the_next_message_only(tmp_path: Path) -> None:
    result = _chat(tmp_path, stdin="/image shot.png\nwhat is this?\nand now?\n")
    assert result.returncode == 0, result.stderr
    # the second answer: the conversation still holds the one picture, and no new one was attached
    assert result.stdout.split("\n\n") == [SEEN, SEEN + "\n"]
    assert "attached shot.png (image/png" in result.stderr


def test_a_missing_picture_is_one_line(tmp_path: Path) -> None:
    result = _chat(tmp_path, "--image", "nowhere.png", "what is this?")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == ["tinytitan chat: cannot read nowhere.png: No such file or directory"]


def test_a_file_that_is_no_picture_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ChatError, match="not a PNG, JPEG, GIF or WebP picture"):
        image_part(str(tmp_path / "notes.txt"))
    (tmp_path / "shot.gif").write_bytes(picture("gif"))
    part, line = image_part(str(tmp_path / "shot.gif"))
    assert part["image_url"].startswith("data:image/gif;base64,") and "image/gif" in line
