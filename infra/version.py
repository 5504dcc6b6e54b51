"""The gateway's version, as pyproject.toml says it: shown by /readyz, the pages' footer and the
OpenAPI document (CHANGELOG.md says what a version number promises)."""

import functools
import importlib.metadata
import tomllib
from pathlib import Path

DISTRIBUTION = "approval-gateway"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@functools.cache
def version() -> str:
    """The installed distribution's version (`make setup` installs the checkout editable, and
    installs it again when pyproject.toml changes); else pyproject.toml's, for a checkout run
    without installing; else "unknown"."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return pyproject_version(PYPROJECT)


def pyproject_version(path: Path) -> str:
    try:
        return str(tomllib.loads(path.read_text())["project"]["version"])
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return "unknown"
