"""The metrics page: for staff only, linked from their nav; its figures are the JSON summary's,
its charts drawn as SVG with no inline script or style, and names from the rows stay text."""

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Event
from tests.metrics import history


@pytest.mark.django_db
class InsightsPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], client: Any) -> None:
        self.users = users
        self.client = client

    def login(self, who: str) -> None:
        self.client.force_login(self.users[who])

    def test_staff_see_the_figures_and_four_charts(self) -> None:
        now = timezone.now()
        history.day(now)
        agents = ("payments", "ops-cleanup", "research", "support")
        for agent in agents:  # each pending since three hours ago: a line each
            history.suspension(agent, now - timedelta(hours=3))
        self.login("admin")

        r = self.client.get("/insights/")

        assert r.status_code == 200
        page = r.content.decode()
        figures = self.client.get("/api/metrics/conversations?window=24h").json()
        total = re.search(r'id="figure-requests"><dt>[^<]+</dt><dd>(\d+)</dd>', page)
        assert total and int(total[1]) == figures["input_requests_total"]
        assert f"{figures['completion_rate']} %" in page
        assert f"{figures['timeout_rate']} %" in page
        for chart in ("requests", "response", "timeouts", "pending"):
            assert f'id="chart-{chart}"' in page
        assert page.count("<svg") == 4
        assert '<rect class="bar"' in page and "<polyline" in page
        for agent in agents:
            assert f'data-name="{agent}"' in page

    @pytest.mark.parametrize("window, buckets", [("1h", 12), ("6h", 24), ("7d", 28), ("30d", 30)])
    def test_each_window_has_its_buckets(self, window: str, buckets: int) -> None:
        self.login("admin")
        page = self.client.get(f"/insights/?window={window}").content.decode()
        assert f'href="?window={window}" aria-current="page"' in page
        per_bucket = page[page.index('<details class="table">') :]
        assert per_bucket.count('<th scope="row">') == buckets

    def test_an_unknown_window_shows_a_day(self) -> None:
        self.login("admin")
        page = self.client.get("/insights/?window=<b>").content.decode()
        assert 'href="?window=24h" aria-current="page"' in page
        assert "<b>" not in page

    @pytest.mark.parametrize("who", ["reviewer", "outsider"])
    def test_it_is_refused_to_anyone_but_staff(self, who: str) -> None:
        self.login(who)
        assert self.client.get("/insights/").status_code == 403
        inbox = self.client.get("/").content.decode()
        assert 'href="/insights/"' not in inbox

    def test_it_asks_a_stranger_to_log_in(self) -> None:
        r = self.client.get("/insights/")
        assert r.status_code == 302 and r["Location"].startswith("/login/")

    def test_staff_find_it_in_the_nav(self) -> None:
        self.login("admin")
        page = self.client.get("/audit/").content.decode()
        assert '<a href="/insights/">Metrics</a>' in page

    def test_names_from_the_rows_stay_text_and_nothing_is_inline(self) -> None:
        history.wait("<img src=x onerror=alert(1)>", timezone.now() - timedelta(minutes=30))
        history.wait("payer", timezone.now() - timedelta(minutes=20), Event.Type.INPUT_PROVIDED)
        self.login("admin")
        page = self.client.get("/insights/?window=1h").content.decode()
        # (The page's own <img> is the brand's icon in the header, a static file.)
        assert "<img src=x" not in page and "onerror=alert(1)>" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "<script" not in page and " style=" not in page and "<style" not in page
