"""The one table of sampling parameters (``request/sampling.py``): the validator, serve's flags and the
model defaults all read it, so their ranges cannot disagree again (repetition_penalty once did)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest, Message, ModelInfo, Sampling
from tinytitan.engine.request.limits import output_budget
from tinytitan.engine.request.sampling import FROM_MODEL, KNOBS, SERVE_FLAGS, Knob, model_values
from tinytitan.engine.request.validate import validate
from tinytitan.settings import Settings, SettingsError

INFO = ModelInfo(id="m", context_window=1000)


def outside(knob: Knob) -> float:
    """A value just outside the knob's range."""
    return knob.low if knob.low_open else knob.low - 1


def request(**sampling: float) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message("user", "hi"),), sampling=Sampling(**sampling))  # type: ignore[arg-type]


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_the_validator_refuses_what_the_table_refuses(knob: Knob) -> None:
    if knob.name == "min_p":  # no protocol carries it: a model default only
        return
    with pytest.raises(InvalidRequest) as err:
        validate(request(**{knob.name: outside(knob)}), INFO)
    assert err.value.param == knob.name and knob.range_text() in err.value.message
    validate(request(**{knob.name: knob.kind(knob.low + (1 if knob.low_open else 0))}), INFO)


@pytest.mark.parametrize("knob", SERVE_FLAGS, ids=lambda k: k.name)
def test_serve_flags_refuse_what_a_request_may_not_send(knob: Knob) -> None:
    with pytest.raises(SettingsError) as err:
        Settings(model="m", sampling_defaults={knob.name: outside(knob)}).check()
    assert str(err.value).startswith(knob.flag) and knob.range_text() in str(err.value)


def test_repetition_penalty_has_one_range_on_both_roads() -> None:
    assert validate(request(repetition_penalty=20.0), INFO).sampling.repetition_penalty == 20.0
    Settings(model="m", sampling_defaults={"repetition_penalty": 20.0}).check()


def test_serve_has_one_flag_per_model_default_and_passes_them_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinytitan.cli import serve

    help_text = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "240"}).output
    assert all(knob.flag in help_text for knob in SERVE_FLAGS)
    assert "--presence-penalty" not in help_text  # a request's own only
    seen: list[Settings] = []
    monkeypatch.setattr(serve, "run_server", seen.append)
    result = CliRunner().invoke(app, ["serve", "--model", "m", "--top-k", "7", "--min-p", "0.05"])
    assert result.exit_code == 0, result.output
    assert [s.sampling_defaults for s in seen] == [{"top_k": 7, "min_p": 0.05}]


def test_model_defaults_are_read_for_the_tables_keys_only() -> None:
    config = {k: 0.5 for k in FROM_MODEL} | {"presence_penalty": 1.0, "typical_p": 0.9, "do_sample": True}
    assert set(model_values(config)) == set(FROM_MODEL)
    assert model_values({"temperature": True, "top_k": "40"}) == {}  # not numbers


@pytest.mark.parametrize(
    ("cap", "window", "prompt", "used", "budget"),
    [(100, 1000, 10, 0, 100), (2000, 1000, 10, 0, 990), (100, 1000, 950, 0, 50), (100, 1000, 10, 80, 20)],
)
def test_the_output_budget(cap: int, window: int, prompt: int, used: int, budget: int) -> None:
    assert output_budget(cap, window, prompt, used) == budget
