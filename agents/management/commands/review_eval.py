"""`python manage.py review_eval FILE --agent NAME [--tool TOOL] [--setting FILE]`: replay the
requests people decided in an audit export (JSONL) against a reviewing model's setting, and
print its agreement with people, the approvals it would have made that people rejected, and
its cost in tokens (agents.reviewing.evaluation). It changes nothing."""

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError

from agents import policy
from agents.models import AgentDefinition
from agents.reviewing import evaluation
from agents.reviewing.setting import Setting
from agents.rules import PolicyError, check_keys
from agents.runtime.tools import registry

SHOWN = 20  # wrong approvals listed, at most
ARGUMENTS = 120  # characters of their arguments


def _setting_file(path: str) -> Setting:
    try:
        found = yaml.safe_load(Path(path).read_text())
        review = check_keys({"review": found}, path).get("review")
    except (OSError, yaml.YAMLError, PolicyError) as e:
        raise CommandError(f"--setting {path}: {e}") from e
    if not review:
        raise CommandError(f"--setting {path}: a review setting, like {{model: ..., mode: ...}}")
    return Setting.of(review)


def _agent_setting(agent: AgentDefinition, tool: str) -> Setting | None:
    """The review setting in force for the agent's calls of `tool`, as a request raised now
    would keep it (None: none is set)."""
    found = registry.get(tool)
    declared = found if found is not None else SimpleNamespace(name=tool, policy=None)
    review = policy.effective(agent.policy or {}, declared).get("review")
    return Setting.of(review) if review else None


class Command(BaseCommand):
    help = "Replay past decisions (an audit export, JSONL) against a reviewing model's setting."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="the audit export: /audit/export.jsonl")
        parser.add_argument("--agent", required=True, help="the agent whose requests replay")
        parser.add_argument("--tool", help="only this tool's requests")
        parser.add_argument(
            "--setting", help="a review setting (YAML or JSON) instead of the agent's own"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        agent_name, tool = options["agent"], options["tool"]
        try:
            lines = Path(options["file"]).read_text().splitlines()
            pasts = evaluation.people_decided(lines)
        except (OSError, ValueError) as e:
            raise CommandError(f"{options['file']}: {e}") from e
        pasts = [p for p in pasts if p.agent == agent_name and (not tool or p.tool == tool)]
        if options["setting"]:
            given = _setting_file(options["setting"])
            results = evaluation.replay(pasts, lambda _tool: given)
        else:
            agent = AgentDefinition.objects.filter(name=agent_name).first()
            if agent is None:
                raise CommandError(f"no agent {agent_name!r}; give its setting with --setting")
            results = evaluation.replay(pasts, lambda t: _agent_setting(agent, t))
        if not results:
            which = f"{agent_name} ({tool})" if tool else agent_name
            raise CommandError(
                f"nothing to replay: no request of {which} that people decided has a review "
                "setting (give one with --setting)"
            )
        for name, result in sorted(results.items()):
            self._report(agent_name, name, result)

    def _report(self, agent: str, tool: str, r: evaluation.Replay) -> None:
        s = r.setting
        mode = f"{s.mode}, may {', '.join(s.may) or 'nothing'}" if s.decides else s.mode
        self.stdout.write(
            f"Replayed {r.replayed} decided requests of {agent} ({tool}) against {s.model} "
            f"({mode})."
        )
        share = f" ({r.agreement:.1%})" if r.agreement is not None else ""
        self.stdout.write(
            f"Agreement with people: {r.agreed} of {r.decided} it decided{share}; "
            f"{r.escalated} left to people, {r.failed} failed."
        )
        self.stdout.write(f"Approvals people rejected: {len(r.wrong_approvals)}")
        for past, reason in r.wrong_approvals[:SHOWN]:
            arguments = json.dumps(past.arguments, ensure_ascii=False, sort_keys=True)
            if len(arguments) > ARGUMENTS:
                arguments = arguments[: ARGUMENTS - 1] + "…"
            self.stdout.write(f"  {past.id}  {arguments}  model: {json.dumps(reason)[:200]}")
        self.stdout.write(f"Rejections people approved: {len(r.wrong_rejections)}")
        self.stdout.write(
            f"Cost: {r.input_tokens:,} input tokens, {r.output_tokens:,} output tokens."
        )
