"""The demo: harmless tools whose effects a person can see (the DemoAction table), and the
agents of `make run` (demo/agents.yaml)."""
