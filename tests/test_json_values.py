"""JSONField values on PostgreSQL are encoded by orjson (infra/postgresql/base.py): what
comes back is what was stored, and what json.dumps refused it still refuses."""

import json
from datetime import datetime
from typing import Any

import pytest

from access.models import ApiToken
from infra.postgresql.base import dumps

VALUES = [
    {"role": "user", "content": [{"type": "text", "text": 'ünïcode ✓ "quoted" \\ \n'}]},
    [1, 2.5, 1.5e-7, -3, None, True, False, "", [], {}],
    {"nested": {"deep": [{"x": [1, [2, [3]]]}]}},
    # orjson refuses these; json.dumps encodes them, as before.
    {1: "an integer key", None: "a null key"},
    {"big": 2**70},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_decodes_to_what_json_dumps_gives(value: Any) -> None:
    assert json.loads(dumps(value)) == json.loads(json.dumps(value))


def test_what_json_dumps_refuses_is_still_refused() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"when": datetime(2026, 11, 25)})


@pytest.mark.django_db
@pytest.mark.parametrize("value", VALUES)
def test_a_json_field_gives_back_what_was_stored(value: Any, users: dict[str, Any]) -> None:
    token, _ = ApiToken.issue(users["reviewer"], "json", scopes=["runs"])
    ApiToken.objects.filter(pk=token.pk).update(scopes=value)
    assert ApiToken.objects.get(pk=token.pk).scopes == json.loads(json.dumps(value))
