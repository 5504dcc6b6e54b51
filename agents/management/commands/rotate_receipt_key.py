"""Make a new current key for the decisions' receipts (agents.receipt_keys)."""

from typing import Any

from django.core.management.base import BaseCommand

from agents import receipt_keys


class Command(BaseCommand):
    help = (
        "Make a new Ed25519 key that signs receipts from now on. The old keys stay published "
        "at /.well-known/jwks.json, so the receipts they signed still verify. Every machine "
        "signs with the new key within a minute (they re-read the current key that often)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        kid = receipt_keys.rotate()
        self.stdout.write(f"receipts are now signed with key {kid}")
