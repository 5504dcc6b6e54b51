"""docs/events.md names every event type the gateway records, each in a row of its tables,
and says how many there are."""

import re

from a2a_server import push
from access import passkeys
from agents.models import Event
from slack_approvals import links as slack_links
from sso import accounts as sso_accounts
from tests.conftest import ROOT
from webhooks import models as webhooks
from webpush import devices as push_devices


class EventsPageTestCase:
    def test_it_has_a_row_for_every_event_type(self) -> None:
        text = (ROOT / "docs" / "events.md").read_text()
        rows = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", text, re.M))
        recorded = {
            *Event.Type.values,
            *webhooks.Notice.values,
            *push.Notice.values,
            *slack_links.Notice.values,
            *passkeys.Notice.values,
            *push_devices.Notice.values,
            *sso_accounts.Notice.values,
        }
        assert rows == recorded
        assert f"There are {len(recorded)} event types" in text
