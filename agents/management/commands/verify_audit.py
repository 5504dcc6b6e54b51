"""Check the Event table's hash chains (agents.chain) and name the first broken link of each."""

import time
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import chain
from agents.models import Event


class Command(BaseCommand):
    help = (
        "Recompute every event's hash and follow each chain (one per thread, one for events "
        "with no thread); name the first broken link of each chain and exit with status 1 if "
        "any is broken. Rows written before the chain existed are counted as unchained."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--thread",
            action="append",
            metavar="ID",
            help="Check only this thread's chain (repeatable).",
        )
        parser.add_argument(
            "--heads",
            action="store_true",
            help="Print each chain's newest event and hash: kept elsewhere, they show later "
            "whether the newest rows of a chain were removed.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            threads = [uuid.UUID(t) for t in options["thread"]] if options["thread"] else None
        except ValueError as e:
            raise CommandError(f"--thread takes a thread's id: {e}") from e
        verbose = options["verbosity"] >= 1
        total = (
            Event.objects.filter(thread_id__in=threads) if threads else Event.objects.all()
        ).count()
        started = time.monotonic()

        def progress(done: int) -> None:
            if verbose:
                self.stderr.write(
                    f"checked {done:,} of {total:,} events ({100 * done // max(total, 1)}%), "
                    f"{time.monotonic() - started:.0f} s"
                )

        report = chain.verify(threads, progress=progress)
        report.breaks.sort(key=lambda found: found.event_id)
        for found in report.breaks:
            self.stdout.write(f"BROKEN {found}")
        if options["heads"]:
            for key, (event_id, head) in sorted(report.heads.items(), key=lambda kv: kv[1][0]):
                self.stdout.write(f"head {key or 'threadless'} #{event_id} {head}")
        summary = (
            f"{report.events:,} events in {report.chains:,} chains: "
            f"{len(report.breaks)} broken, {report.unchained:,} unchained "
            "(written before the chain began)"
        )
        if report.breaks:
            self.stdout.write(summary)
            raise CommandError(
                f"the audit trail is broken in {len(report.breaks)} chain(s); first: "
                f"{report.breaks[0]}"
            )
        self.stdout.write(f"OK {summary}")
