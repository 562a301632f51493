"""The sampling-defaults table: a model's own values first, then every table row its name matches."""

from __future__ import annotations

from tinytitan.engine.request.defaults import GENERATION_CONFIG, MEASURED, model_defaults

CARD = "publisher: SmolLM2 model card"


def test_the_embedded_135m_gets_the_measured_top_p_and_the_cards_temperature() -> None:
    values, sources = model_defaults({}, ["SmolLM2-135M-Instruct.Q4_1.gguf"])
    assert values == {"temperature": 0.2, "top_p": 0.5}
    assert sources == {"temperature": CARD, "top_p": MEASURED}


def test_another_smollm2_size_gets_the_card_alone() -> None:
    values, sources = model_defaults({}, ["SmolLM2-1.7B-Instruct"])
    assert values == {"temperature": 0.2, "top_p": 0.9} and set(sources.values()) == {CARD}


def test_the_models_own_values_win_over_the_table() -> None:
    values, sources = model_defaults({"top_p": 0.8}, ["HuggingFaceTB/SmolLM2-135M-Instruct"])
    assert values == {"top_p": 0.8, "temperature": 0.2}
    assert sources == {"top_p": GENERATION_CONFIG, "temperature": CARD}
