"""The committed copies of the OpenAPI document (clients generated from it) equal what the
gateway serves now, so a client's types cannot drift from the API."""

from pathlib import Path

from django.test import SimpleTestCase

from approvals.management.commands.openapi import document_text

ROOT = Path(__file__).resolve().parents[2]
# The TypeScript client's types (src/schema.d.ts) are generated from this copy (npm run types).
COPIES = [ROOT / "clients" / "typescript" / "openapi.json"]


class OpenApiCopiesTestCase(SimpleTestCase):
    def test_every_copy_is_the_document_the_gateway_serves(self) -> None:
        served = document_text()
        for copy in COPIES:
            self.assertTrue(
                copy.read_text(encoding="utf-8") == served,
                f"{copy.relative_to(ROOT)} differs from the API's document: run "
                f"`.venv/bin/python manage.py openapi -o {copy.relative_to(ROOT)}`, then "
                "`npm run types` in clients/typescript, and commit both.",
            )
