"""The one stub-script builder."""

from __future__ import annotations

import pytest

from tinytitan.engine.models.stub import ScriptError
from tinytitan.testing.scripts import STUB_MODEL, TEXT_RULE, script


def test_no_rules_is_one_plain_text_reply() -> None:
    assert script() == {"model": STUB_MODEL, "rules": [TEXT_RULE]}


def test_rules_are_copied_and_extra_keys_kept() -> None:
    rule = {"reply": {"text": "x"}}
    built = script(rule, context_window=64, tokenizer=False)
    built["rules"][0]["reply"]["text"] = "changed"
    assert rule == {"reply": {"text": "x"}}
    assert (built["context_window"], built["tokenizer"]) == (64, False)


def test_a_bad_rule_is_refused_when_built() -> None:
    with pytest.raises(ScriptError, match=r"rules\[0\].when has unknown keys: usr"):
        script({"when": {"usr": "x"}, "reply": {}})
