"""Template rendering and reasoning-level detection for the mlx backend (reference §5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tinytitan.engine.models.mlx import MlxBackend, ModelUnavailable
from tinytitan.engine.models.mlx.template import detect_levels, thinking_kwargs
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling, Tool, ToolCall
from tinytitan.engine.service import Engine
from tinytitan.testing.loop import run


def model_copy(tiny_dir: Path, dest: Path, *, template: str | None = None, extra: dict | None = None) -> Path:
    """A model directory sharing the tiny model's files (weights linked, not copied)."""
    dest.mkdir()
    for item in tiny_dir.iterdir():
        if item.name == "model.safetensors":
            (dest / item.name).symlink_to(item)
        elif item.name != "chat_template.jinja" or template is None:
            shutil.copy(item, dest / item.name)
    if template is not None:
        (dest / "chat_template.jinja").write_text(template, encoding="utf-8")
    if extra is not None:
        (dest / "tinytitan.json").write_text(json.dumps(extra), encoding="utf-8")
    return dest


@pytest.mark.parametrize(
    "template, levels",
    [
        ("{% if enable_thinking is defined and enable_thinking is false %}x{% endif %}", ("off", "on")),
        (
            "{% set e = reasoning_effort | default('medium') %}{% if e in ['low', 'medium', 'high'] %}{% endif %}",
            ("off", "low", "medium", "high"),
        ),
        (
            "{% if reasoning_effort == 'minimal' or reasoning_effort == 'xhigh' %}{% endif %}",
            ("off", "minimal", "xhigh"),
        ),
        ("Reasoning: {{ reasoning_effort }}", ("off", "low", "medium", "high")),
        ("{{ messages }}", ()),
    ],
)
def test_detect_levels(template: str, levels: tuple[str, ...]) -> None:
    assert detect_levels(template) == levels


def test_thinking_kwargs() -> None:
    assert thinking_kwargs("off", ("off", "on")) == {"enable_thinking": False}
    assert thinking_kwargs("on", ("off", "on")) == {"enable_thinking": True}
    assert thinking_kwargs("low", ("off", "low")) == {"enable_thinking": True, "reasoning_effort": "low"}
    assert thinking_kwargs(None, ()) == {}


def test_tinytitan_json_overrides_the_template(tiny_dir: Path, tmp_path: Path) -> None:
    path = model_copy(
        tiny_dir, tmp_path / "m", extra={"reasoning_levels": ["high", "off", "low"], "default_reasoning": "low"}
    )
    info = MlxBackend(str(path)).info
    assert info.reasoning_levels == ("off", "low", "high")
    assert info.default_reasoning == "low"


def test_a_bad_tinytitan_json_is_a_startup_error(tiny_dir: Path, tmp_path: Path) -> None:
    path = model_copy(tiny_dir, tmp_path / "m", extra={"reasoning_levels": ["galaxy-brain"]})
    with pytest.raises(ModelUnavailable, match=r"tinytitan\.json"):
        MlxBackend(str(path))


def test_a_missing_template_is_a_startup_error_naming_the_file(tiny_dir: Path, tmp_path: Path) -> None:
    path = model_copy(tiny_dir, tmp_path / "m")
    (path / "chat_template.jinja").unlink()
    with pytest.raises(ModelUnavailable, match=r"chat_template\.jinja") as err:
        MlxBackend(str(path))
    assert "tokenizer_config.json" in err.value.message


def test_template_in_tokenizer_config(tiny_dir: Path, tmp_path: Path) -> None:
    path = model_copy(tiny_dir, tmp_path / "m")
    template = (path / "chat_template.jinja").read_text(encoding="utf-8")
    (path / "chat_template.jinja").unlink()
    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = template
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    backend = MlxBackend(str(path))
    assert backend.info.reasoning_levels == ("off", "on")


def render(backend: MlxBackend, request: ChatRequest) -> str:
    engine = Engine(backend)
    try:
        _validated, prompt = run(engine.validate(request))
    finally:
        engine.shutdown()
    return prompt.text


def test_thinking_switch_renders(tiny_dir: Path) -> None:
    backend = MlxBackend(str(tiny_dir), model_id="x")
    messages = (Message("system", "Be brief."), Message("user", "Hi"))
    off = render(backend, ChatRequest(model="x", messages=messages, reasoning=ReasoningControls(enable_thinking=False)))
    on = render(backend, ChatRequest(model="x", messages=messages))
    assert (
        off == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert on.endswith("<|im_start|>assistant\n")


def test_tools_and_tool_turns_render(tiny_dir: Path) -> None:
    backend = MlxBackend(str(tiny_dir), model_id="x")
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ChatRequest(
        model="x",
        messages=(
            Message("user", "Read it."),
            Message("assistant", "", tool_calls=(ToolCall("call_1", "read", '{"path": "/a"}'),)),
            Message("tool", "contents", tool_call_id="call_1"),
        ),
        tools=(Tool("read", "Read a file", schema),),
    )
    text = render(backend, request)
    tool_json = json.dumps(
        {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": schema}}
    )
    assert "<tools>\n" + tool_json + "\n</tools>" in text
    assert '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\ncontents\n</tool_response><|im_end|>" in text


def test_a_template_that_opens_the_thought_starts_in_reasoning(tiny_dir: Path, tmp_path: Path) -> None:
    template = (
        (tiny_dir / "chat_template.jinja")
        .read_text(encoding="utf-8")
        .replace(
            "{{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking",
            "{{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is not defined or enable_thinking %}"
            "{{- '<think>\\n' }}{%- endif %}\n    {%- if enable_thinking",
        )
    )
    assert template.count("<think>\\n'") == 1
    path = model_copy(tiny_dir, tmp_path / "m", template=template)
    engine = Engine(MlxBackend(str(path), model_id="x"))
    try:
        request = ChatRequest(
            model="x", messages=(Message("user", "Think."),), max_tokens=6, sampling=Sampling(temperature=0.0)
        )
        _validated, prompt = run(engine.validate(request))
        assert prompt.start_in_reasoning and prompt.text.endswith("<think>\n")
        done = run(engine.complete(request))
        usage = done.finished.usage
        assert usage is not None and usage.reasoning_tokens == usage.completion_tokens == 6
        assert done.reasoning and not done.text
    finally:
        engine.shutdown()
