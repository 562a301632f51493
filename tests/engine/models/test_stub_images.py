"""The scripted backend's images (issue 41): ``vision`` declares the model takes them, ``when.images``
and ``when.image_digest`` match on them, ``describe_images`` says what the model was shown."""

from __future__ import annotations

import hashlib

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.models.stub import ScriptError, StubBackend, load_script
from tinytitan.engine.request import ChatRequest, Message, Part
from tinytitan.engine.request.image_check import ImageLimits, ImageRef, check_image
from tinytitan.engine.request.validate import validate
from tinytitan.testing.images import picture

from .support import run_batch

PNG = picture("png", 3, 2)
GIF = picture("gif", 4, 4)


def image(data: bytes) -> Part:
    return Part("image", image=check_image(data, ImageRef("", "p"), ImageLimits()))


def answer(backend: StubBackend, *parts: Part) -> str:
    request = ChatRequest(model="stub-model", messages=(Message("user", (Part("text", "look"), *parts)),))
    validated = validate(request, backend.info)
    return run_batch(backend, validated)


SCRIPT = {
    "vision": True,
    "rules": [
        {"when": {"images": 0}, "reply": {"text": "no picture"}},
        {"when": {"image_digest": hashlib.sha256(GIF).hexdigest()[:10]}, "reply": {"text": "the gif"}},
        {"reply": {"describe_images": True}},
    ],
}


def test_vision_is_off_unless_the_script_says_so() -> None:
    assert StubBackend(load_script({"rules": []})).info.vision is False
    assert StubBackend(load_script(SCRIPT)).info.vision is True


def test_rules_match_on_the_images() -> None:
    backend = StubBackend(load_script(SCRIPT))
    assert answer(backend) == "no picture"
    assert answer(backend, image(PNG), image(GIF)) == "the gif"
    digest = hashlib.sha256(PNG).hexdigest()[:12]
    assert answer(backend, image(PNG)) == f"1 image(s): image/png 3x2 {digest}"
    assert backend.recorded[-1]["messages"][0]["images"][0]["digest"] == hashlib.sha256(PNG).hexdigest()


def test_a_text_only_script_refuses_images_naming_the_model() -> None:
    backend = StubBackend(load_script({"model": "words-only", "rules": []}))
    request = ChatRequest(model="words-only", messages=(Message("user", (image(PNG),)),))
    with pytest.raises(InvalidRequest, match="model 'words-only' has no vision input") as info:
        validate(request, backend.info)
    assert info.value.param == "messages[0].content[0]"


def test_the_keys_are_known() -> None:
    with pytest.raises(ScriptError, match="unknown keys: imagez"):
        load_script({"rules": [{"when": {"imagez": 1}, "reply": {}}]})
