"""The public JSON API of design.md: thin views that parse, authorize and call one action,
a module per resource."""
