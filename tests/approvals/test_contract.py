"""One contract for request bodies (approvals.contract): the model the OpenAPI document shows
for a body is the one its view parses it with, and a refusal speaks the API's words."""

from typing import Any

import pytest
from pydantic import BaseModel

from approvals import openapi
from approvals.api import bodies, decisions, extend, external, replies, threads
from approvals.contract import UNKNOWN, parse
from approvals.http import BadRequest

# Each endpoint that parses its body with a model, and that model.
PARSED = {
    (threads.threads, "POST"): bodies.StartRun,
    (replies.thread_messages, "POST"): bodies.Message,
    (decisions.resume, "POST"): bodies.Resume,
    (extend.extend, "POST"): bodies.Extend,
    (external.requests, "POST"): external.RaiseRequest,
}


def paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field's path, by the name the body uses (its alias), nested models included."""
    found = []
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        found.append(path)
        for inner in getattr(field.annotation, "__args__", (field.annotation,)):
            if isinstance(inner, type) and issubclass(inner, openapi.Body):
                found += paths(inner, f"{path}.")
    return found


@pytest.mark.parametrize(("view", "method"), list(PARSED), ids=lambda v: getattr(v, "__name__", v))
def test_the_documented_body_is_the_parsing_model(view: Any, method: str) -> None:
    assert view.openapi[method].body is PARSED[view, method]


@pytest.mark.parametrize("model", list(PARSED.values()), ids=lambda m: m.__name__)
def test_every_field_has_words_of_its_own(model: type[openapi.Body]) -> None:
    """pydantic's wording ("Input should be a valid string") never reaches a caller."""
    assert model.refused != openapi.Body.refused
    assert sorted(paths(model)) == sorted(model.says)


def refused(model: type[openapi.Body], data: dict[str, Any]) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse(model, data)
    assert caught.value.status == 400 and caught.value.code == "invalid"
    return caught.value


def test_a_refusal_names_every_wrong_field_in_the_models_words(settings: Any) -> None:
    settings.MAX_EXTENSION_SECONDS = 60
    e = refused(bodies.Extend, {"seconds": "30", "reason": " ", "by": "mallory"})
    assert e.detail == "The extension is not valid."
    assert e.fields == {
        "seconds": "A whole number of seconds from 1 to 60.",  # the setting, read now
        "reason": "Say why the deadline moves.",
        "by": UNKNOWN,
    }


def test_types_are_strict() -> None:
    for seconds in ("30", 30.0, True):
        assert set(refused(bodies.Extend, {"seconds": seconds, "reason": "x"}).fields) == {
            "seconds"
        }
    for ignore in (1, False, None):
        assert refused(bodies.Resume, {"ignore": ignore}).fields == {"ignore": "Send true."}


def test_a_nested_field_speaks_for_itself_or_its_parent() -> None:
    e = refused(bodies.Resume, {"approved": False, "seen": {"agent_version": "2"}})
    assert e.fields == {"seen.agent_version": "The request's agent_version, a whole number."}
    e = refused(bodies.Resume, {"approved": False, "seen": {"shown": 1}})
    assert e.fields == {"seen": bodies.Resume.says["seen"]}


def test_a_rule_over_several_fields_names_the_one_to_fix() -> None:
    e = refused(bodies.Resume, {"approved": False, "modifiedArgs": {"amount": 1}})
    assert e.detail == "modifiedArgs goes with an approval."
    assert e.fields == {"modifiedArgs": "Only an approval can edit the arguments."}


def test_an_unknown_field_sets_the_detail_when_the_model_has_one() -> None:
    e = refused(bodies.Resume, {"response": "Blue", "approved": True})
    assert (e.detail, e.fields) == ("Unknown fields.", {"approved": UNKNOWN})
    e = refused(bodies.Message, {"text": "hi", "colour": "red"})
    assert (e.detail, e.fields) == ("The message has unknown fields.", {"colour": UNKNOWN})


def test_a_null_is_not_a_field_left_out() -> None:
    ask = {"agent": "bot", "run_id": "r", "idempotency_key": "k", "kind": "input", "prompt": "?"}
    assert parse(external.RaiseRequest, ask).tool == "ask_human"
    assert set(refused(external.RaiseRequest, {**ask, "tool": None}).fields) == {"tool"}
    assert parse(external.RaiseRequest, {**ask, "tool": "pay"}).timeout > 0
    assert set(refused(external.RaiseRequest, {**ask, "timeout": None}).fields) == {"timeout"}


def test_a_decision_is_handed_on_as_agents_decisions_takes_it() -> None:
    body = {"approved": True, "seen": {"args_hash": "ab"}, "confirmVersionChange": True}
    assert parse(bodies.Resume, body).decision() == {
        "approved": True,
        "reason": "",
        "modifiedArgs": None,
        "seen": {"args_hash": "ab"},
        "confirmVersionChange": True,
    }
    assert parse(bodies.Resume, {"response": "Blue"}).decision() == {"response": "Blue"}
    assert parse(bodies.Resume, {"ignore": True}).decision() == {"ignore": True}
