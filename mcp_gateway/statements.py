"""The statement every call through /mcp/<name> makes to find its upstream, compiled once per
process (infra.compiled), behind a function named for what it reads: mcp_gateway.proxy calls
`upstream_named`, never the compiled statement. The sentinel is a value no real row has."""

from infra.compiled import Compiled, fields
from mcp_gateway.models import Upstream

_FIELDS = fields(Upstream)
_UPSTREAM = Compiled(
    lambda name: Upstream.objects.filter(name=name).values_list(*_FIELDS).order_by()[:1],
    "(sentinel: a name)",
)


def upstream_named(name: str) -> Upstream | None:
    """The upstream of this name, as `Upstream.objects.filter(name=name).first()` gives it."""
    rows = _UPSTREAM.rows(name)
    return Upstream.from_db("default", _FIELDS, rows[0]) if rows else None
