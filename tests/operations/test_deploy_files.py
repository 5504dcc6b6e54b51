"""The deployment files (Dockerfile, compose.yaml, deploy/systemd) run nothing but
`manage.py serve --role ...`, with options serve accepts, and lay the roles out as
docs/operations.md says. The roles themselves run in test_serve_roles.py and
test_two_machines.py."""

import re
import shlex
from collections import Counter
from pathlib import Path

import yaml

from gateway.management.commands.serve import ROLES, Command
from tests.conftest import ROOT


def parsed(args: list[str]) -> dict:
    """serve's options from `args` (after `serve`), as serve's own parser reads them."""
    assert args[0] == "serve", args
    options = vars(Command().create_parser("manage.py", "serve").parse_args(args[1:]))
    assert options["role"], f"{args} names no role"
    return options


class DeployFilesTestCase:
    def test_the_image_runs_serve(self) -> None:
        text = (ROOT / "Dockerfile").read_text()
        assert 'ENTRYPOINT ["python", "manage.py"]' in text
        cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
        assert cmd and parsed(yaml.safe_load(cmd.group(1)))["role"] == ["all"]
        assert re.search(r"^USER gateway$", text, re.M), "the image runs as root"
        assert "collectstatic" in text

    def test_compose_runs_each_role_through_serve(self) -> None:
        compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
        roles: Counter[str] = Counter()
        for name, service in compose["services"].items():
            if service.get("image") != "approval-gateway":
                continue
            options = parsed(service["command"])
            roles.update(options["role"])
            if "web" in options["role"]:
                assert options["proxy_headers"], f"{name} is behind Caddy"
                assert service["environment"]["TRUSTED_PROXIES"] == "10.89.0.10"
        assert roles == {"web": 2, "worker": 2, "deadlines": 1, "beat": 1}
        assert set(roles) == set(ROLES)
        assert {"postgres", "redis", "caddy"} <= set(compose["services"])

    def test_the_systemd_units_run_each_role_through_serve(self) -> None:
        units = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
        roles = []
        for unit in units:
            text = unit.read_text()
            start = re.search(r"^ExecStart=(.*)$", text, re.M).group(1)
            program, script, *args = shlex.split(start)
            assert program.endswith("/python") and script == "manage.py", start
            roles += parsed(args)["role"]
            assert re.search(r"^Restart=always$", text, re.M)
            assert not re.search(r"^User=root$", text, re.M)
        assert sorted(roles) == sorted(ROLES)
        assert Path(ROOT / "deploy" / "gateway.env.example").exists()

    def test_the_images_static_files_are_collected_as_its_build_collects_them(
        self, tmp_path: Path
    ) -> None:
        # The Dockerfile's build step, run here as written (no Docker on the test machines):
        # collectstatic with a throwaway key into STATIC_ROOT, which whitenoise serves from.
        import os
        import subprocess
        import sys

        step = re.search(
            r"&& (SECRET_KEY=\S+) python manage.py (collectstatic [^\n\\]+)",
            (ROOT / "Dockerfile").read_text(),
        )
        assert step, "the Dockerfile no longer collects the static files"
        key = step.group(1).split("=", 1)[1]
        env = dict(
            os.environ, SECRET_KEY=key, STATIC_ROOT=str(tmp_path), GATEWAY_DATA_DIR=str(tmp_path)
        )
        env.pop("DATABASE_URL", None)
        subprocess.run(
            [sys.executable, "manage.py", *shlex.split(step.group(2))],
            cwd=ROOT,
            env=env,
            check=True,
        )
        for page_file in ("js/inbox.js", "js/select.js", "js/keys.js", "css/app.css"):
            assert (tmp_path / page_file).is_file(), f"{page_file} is not in the image"
