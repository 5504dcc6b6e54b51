"""`python manage.py openapi [--output FILE]`: the OpenAPI document /api/openapi.json serves
(approvals.openapi.build), for clients generated from it without a running server
(clients/typescript's openapi.json, which tests/approvals/test_openapi_copies.py keeps equal)."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from approvals import openapi


def document_text() -> str:
    """The document as the committed copies hold it: indented, non-ASCII kept, a final newline."""
    return json.dumps(openapi.build(), indent=2, ensure_ascii=False) + "\n"


class Command(BaseCommand):
    help = "Print the API's OpenAPI 3.1 document (what /api/openapi.json serves), or write it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--output", "-o", help="a file to write it to (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        text = document_text()
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
