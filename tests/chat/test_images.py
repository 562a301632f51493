"""``tinytitan chat`` attaches pictures (issue 41.5): ``--image PATH`` with a prompt, ``/image PATH``
for the next message; a file that is missing or no picture is one line, and nothing is sent."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tinytitan.chat.client import ChatError
from tinytitan.chat.images import image_part
from tinytitan.engine.device.images import VIRTUAL_BASE
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest
from tinytitan.testing.images import checked_picture, data_url, image_message, picture
from tinytitan.testing.process import REPO_ROOT
from tinytitan.testing.scripts import script
from tinytitan.testing.server import live_server

PNG = picture("png", 8, 6)
SEEN = f"1 image(s): image/png 8x6 {hashlib.sha256(PNG).hexdigest()[:12]}"


def _chat(
    tmp_path: Path, *args: str, stdin: str = "", backend: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``tinytitan chat`` as a process: the scripted vision backend unless ``backend`` names another."""
    (tmp_path / "shot.png").write_bytes(PNG)
    if not backend:
        stub = tmp_path / "stub.json"
        stub.write_text(json.dumps(script({"reply": {"describe_images": True}}, vision=True)))
        backend = ("--stub", str(stub))
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "chat", *backend, *args],
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
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


# -- the tiny random vision model ------------------------------------------------------------------


def test_a_one_shot_prompt_with_a_picture_for_the_tiny_vision_model(tmp_path: Path, tiny_vision_dir: Path) -> None:
    """In-process: the model loads, takes the picture and answers (gibberish: a random model) once."""
    result = _chat(
        tmp_path, "--image", "shot.png", "--max-tokens", "3", "what is this?", backend=("--model", str(tiny_vision_dir))
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), result.stderr


def test_the_picture_reaches_a_served_vision_model(tmp_path: Path, tiny_vision_dir: Path) -> None:
    """Against ``serve``'s socket: the same question and picture sent afterwards finds the chat's
    picture in the prompt cache, every one of its image tokens."""
    with live_server(MlxBackend(str(tiny_vision_dir))) as live:
        model = live.engine.info.id
        result = _chat(
            tmp_path,
            "--image",
            "shot.png",
            "--max-tokens",
            "3",
            "what is this?",
            backend=("--url", live.url, "--model", model),
        )
        assert result.returncode == 0, result.stderr
        question = [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": data_url(PNG)},
        ]
        body = {"model": model, "input": [{"role": "user", "content": question}], "max_output_tokens": 1}
        usage = httpx.post(live.v1 + "/responses", json=body, timeout=300).json()["usage"]
        shot = checked_picture((200, 30, 30), (8, 6))  # PNG, as the request side checks it
        tokens = live.prompt_tokens(ChatRequest(model=model, messages=(image_message("what is this?", shot),)))
    last_image_token = max(i for i, t in enumerate(tokens) if t >= VIRTUAL_BASE)
    assert usage["input_tokens"] == len(tokens)
    assert usage["input_tokens_details"]["cached_tokens"] > last_image_token, usage


def test_a_text_only_model_refuses_the_picture_in_one_line_before_sending(tmp_path: Path) -> None:
    stub = tmp_path / "text.json"
    stub.write_text(json.dumps(script({"reply": {"describe_images": True}})))  # no vision
    result = _chat(tmp_path, "--image", "shot.png", "what is this?", backend=("--stub", str(stub)))
    assert result.returncode == 2 and result.stdout == ""
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("tinytitan chat: '") and "is a text-only model and cannot see pictures" in line
    result = _chat(tmp_path, stdin="/image shot.png\nhello\n", backend=("--stub", str(stub)))
    assert result.returncode == 0, result.stderr
    assert "is a text-only model and cannot see pictures" in result.stderr and "attached" not in result.stderr
