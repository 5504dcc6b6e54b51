"""What every page's template is given by the project: the version, for the footer."""

from typing import Any

from django.http import HttpRequest

from infra.version import version


def project(request: HttpRequest) -> dict[str, Any]:
    return {"gateway_version": version()}
