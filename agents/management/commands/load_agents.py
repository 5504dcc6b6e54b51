"""`python manage.py load_agents PATH...`: create or update agents from YAML files, and say which
were created or changed."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agents.agentfiles import AgentFileError, load


class Command(BaseCommand):
    help = "Create or update agent definitions (by name) from YAML agent files."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("paths", nargs="+")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            loaded = load(options["paths"])
        except (AgentFileError, OSError) as e:
            raise CommandError(str(e)) from e
        # Only what changed: loading the same files again says nothing.
        for agent, change in loaded:
            if change:
                self.stdout.write(f"{change} agent {agent.name}")
