"""The audit trail in a browser: filters, CSV and JSON Lines exports, staff only."""

import csv
import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from agents.models import Thread
from tests.conftest import wait_for
from tests.e2e.conftest import Site
from tests.e2e.test_inbox import AGENTS, card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


class AuditPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_filters_and_exports_carry_the_reviewer_and_the_reason(self) -> None:
        rejected_tid = start(self.api, "payer")
        rejected = pending_of(rejected_tid)
        other_tid = start(self.api, "mischief")
        other = pending_of(other_tid)
        reviewer = self.site.login("reviewer")
        box = card(reviewer, rejected)
        box.get_by_role("button", name="Reject…").click()
        box.locator("input[name=reason]").fill("Invoice already paid <twice>")
        box.get_by_role("button", name="Reject", exact=True).click()
        expect(gone(reviewer, rejected).locator(".outcome")).to_have_text(
            "rejected by alice: Invoice already paid <twice>"
        )
        wait_for(lambda: Thread.objects.get(pk=rejected_tid).status == "completed")
        r = self.api.post(
            f"/api/threads/{other_tid}/suspensions/{other.id}/resume", {"approved": True}
        )
        assert r.status_code == 202

        admin = self.site.login("admin", timezone_id="Europe/Berlin")
        admin.goto(self.site.url("/audit/"))
        item = admin.locator(f"#a-{rejected.id}")
        expect(item.locator(".facts")).to_contain_text(" · decided by alice")
        expect(item.locator(".reviewer")).to_have_text("alice")
        # Times in the reader's zone, which is named.
        expect(item.locator(".facts time")).to_have_text(re.compile(r"\d\d:\d\d:\d\d GMT\+1$"))
        expect(item.locator(".timeline time").first).to_have_text(
            re.compile(r"^\d\d:\d\d:\d\d GMT\+1$")
        )
        expect(admin.locator("#zone")).to_have_text("Europe/Berlin")
        expect(item.locator(".reason")).to_have_text("Invoice already paid <twice>")
        expect(item.locator(".timeline")).to_contain_text("Decided by alice")
        expect(item.locator(".timeline")).to_contain_text("Tool error")
        self.site.shoot(admin, "audit-desktop")

        expect(admin.get_by_role("button", name="Filters")).to_be_hidden()  # a desktop shows them
        admin.select_option("select[name=outcome]", "rejected")
        admin.select_option("select[name=reviewer]", "alice")
        admin.select_option("select[name=tool]", "transfer_funds")
        admin.get_by_role("button", name="Filter").click()
        expect(admin.locator(".audit-item")).to_have_count(1)
        expect(item).to_be_visible()

        with admin.expect_download() as download:
            admin.click("#export-csv")
        rows = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
        assert [(r["id"], r["decided_by"], r["reason"]) for r in rows] == [
            (str(rejected.id), "alice", "Invoice already paid <twice>")
        ]
        with admin.expect_download() as download:
            admin.click("#export-jsonl")
        lines = [json.loads(line) for line in open(download.value.path()).read().splitlines()]
        assert [(r["id"], r["decided_by"], r["reason"], r["status"]) for r in lines] == [
            (str(rejected.id), "alice", "Invoice already paid <twice>", "rejected")
        ]

    def test_a_non_staff_user_gets_403(self) -> None:
        page = self.site.login("reviewer")
        expect(page.get_by_role("link", name="Audit")).to_have_count(0)
        for path in ("/audit/", "/audit/export.csv", "/audit/export.jsonl"):
            response = page.request.get(self.site.url(path))
            assert response.status == 403, path
        response = page.goto(self.site.url("/audit/"))
        assert response.status == 403
        expect(page.locator("h1")).to_have_text("Not allowed")

    def test_a_page_decision_s_receipt_verifies_with_the_served_keys(self, tmp_path: Any) -> None:
        s = pending_of(start(self.api, "payer"))
        reviewer = self.site.login("reviewer")
        card(reviewer, s).get_by_role("button", name="Approve", exact=True).click()
        expect(gone(reviewer, s)).to_be_visible()
        admin = self.site.login("admin")
        admin.goto(self.site.url("/audit/"))
        shown = admin.locator(f"#a-{s.id} details.receipt")
        shown.locator("summary").click()
        s.refresh_from_db()
        expect(shown.locator("pre.jws")).to_have_text(s.receipt)
        with admin.expect_download() as download:
            admin.click("#export-jsonl")
        [row] = [json.loads(line) for line in open(download.value.path()).read().splitlines()]
        assert row["id"] == str(s.id) and row["receipt"]
        # The served keys and the export alone (manage.py verify_receipts fetches the URL).
        out = tmp_path / "out.txt"
        with out.open("w") as stdout:
            call_command(
                "verify_receipts",
                "--jwks",
                self.site.url("/.well-known/jwks.json"),
                "--export",
                str(download.value.path()),
                stdout=stdout,
            )
        assert "OK 1 receipts verified" in out.read_text()
