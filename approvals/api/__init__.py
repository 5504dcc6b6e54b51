"""The public JSON API (docs/api.md): thin views that parse, authorize and call one action,
a module per resource."""
