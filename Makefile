# `make run` starts the gateway; `make test` runs every test. Both set everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# What is installed, by the checksums of what it was installed from: the gateway alone for
# `make run`, then the development extras and the client for `make setup` and `make test`.
RUN_STAMP := $(VENV)/.installed-run-$(shell cksum pyproject.toml | cut -d' ' -f1)
STAMP := $(VENV)/.installed-dev-$(shell cat pyproject.toml clients/python/pyproject.toml | cksum | cut -d' ' -f1)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The PostgreSQL + Redis setup the second half of `make test` runs against.
TEST_DATABASE_URL ?= postgres://root@127.0.0.1:5432/gateway
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# `make test` runs lint, the docs and the two halves of the suite at once, each half over two
# pytest-xdist processes (PARALLEL=2, the default), each process with its own data folder,
# test database, queue and channel prefix (gateway/testenv.py); the fault suite follows,
# alone. On the 2-core machine: 24 min, against 37 to 42 with PARALLEL=1 (one pytest process
# per half) and 52 with PARALLEL=0 (everything one after the other).
PARALLEL ?= 2
XDIST := $(if $(filter 0 1,$(PARALLEL)),,-n $(PARALLEL))
JOBS := $(if $(filter 0,$(PARALLEL)),1,4)
# The slowest tests, in CI's output.
PYTEST := $(PY) -m pytest --durations=25

.PHONY: setup system-packages walkthrough-packages run test docs test-embedded test-postgres test-typescript test-faults lint clean bench-compare bench-mcp

# What serving needs: the gateway without the development extras (README, "Quick start", has
# the figures). Serving needs no client: clients/python is for agents outside the gateway.
# PYTHONWARNINGS: without setuptools' paragraph on editable installs (a UserWarning of the
# build backend), printed at every fresh install.
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	PYTHONWARNINGS=ignore::UserWarning $(VENV)/bin/pip install -q --disable-pip-version-check -e .
	rm -f $(VENV)/.installed-run-*
	touch $@

# On top, the development extras (tests, lint, docs) and the client for outside agents
# (clients/python; tests/external use it).
$(STAMP): $(RUN_STAMP) clients/python/pyproject.toml
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]' -e clients/python
	rm -f $(VENV)/.installed-dev-*
	touch $@

# jq and curl: only the walk-through of docs/getting-started.md, which follows `make run`
# (serving needs neither): `make walkthrough-packages` installs them.
walkthrough-packages:
	@if ! command -v jq >/dev/null || ! command -v curl >/dev/null; then \
		echo "Installing jq and curl with apt-get (the walk-through in docs/getting-started.md uses them)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq jq curl >/dev/null; \
	fi

# Chromium drives the browser tests; jq and curl, the docs' walk-throughs (tests/test_readme.py).
system-packages:
	@if ! command -v chromium >/dev/null || ! command -v jq >/dev/null || ! command -v curl >/dev/null; then \
		echo "Installing chromium, jq and curl with apt-get"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium jq curl fonts-liberation >/dev/null; \
	fi

setup: $(STAMP) system-packages

# PORT (8000) and HOST (127.0.0.1) say where it listens: `PORT=8123 make run`. It needs no jq
# (the walk-through does: `make walkthrough-packages`).
# serve --demo loads demo/agents.yaml, resets the demo reviewer and admin, starts the demo MCP
# server (demo/mcp_notes.py) and prints it all in one block; LOG_LEVEL=info says more.
run: $(RUN_STAMP)
	@$(PY) manage.py migrate --noinput -v0
	@$(PY) manage.py serve --demo

# In parallel each of the five prints its output when it ends (--output-sync); any failing fails.
test: setup
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target lint docs test-embedded test-postgres test-typescript
	$(MAKE) --no-print-directory test-faults

# The documentation site (mkdocs.yml, docs/), built into site/; a broken link or anchor fails it.
# NO_MKDOCS_2_WARNING: mkdocs-material's notice about its successor, printed on every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The embedded default: SQLite, the filesystem broker, sockets tailing the Event table.
# MAKEFLAGS unset: the `make run` of tests/test_readme.py is a terminal's, not this make's
# (whose --output-sync would hold back everything it prints until it ends).
test-embedded:
	env -u DATABASE_URL -u REDIS_URL -u MAKEFLAGS $(PYTEST) $(XDIST)

# PostgreSQL + Redis. In CI a missing service is a failure; elsewhere it is said and skipped.
test-postgres:
	@if ! $(PY) -c "import psycopg, redis; psycopg.connect('$(TEST_DATABASE_URL)'.rsplit('/', 1)[0] + '/postgres', connect_timeout=3).close(); redis.Redis.from_url('$(TEST_REDIS_URL)', socket_timeout=3).ping()"; then \
		if [ "$${CI:-}" = "true" ]; then echo "PostgreSQL or Redis is not reachable; CI needs both" >&2; exit 1; fi; \
		echo "PostgreSQL or Redis is not reachable: skipping the PostgreSQL + Redis half of the tests"; \
	else \
		env -u MAKEFLAGS DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PYTEST) $(XDIST); \
	fi

# The TypeScript client (clients/typescript): installed from its package-lock.json, built with
# tsc, then node's test runner; its live tests start their own gateway on the embedded default
# (clients/typescript/test/gateway.py, with this virtualenv's Python).
test-typescript: $(STAMP)
	@command -v npm >/dev/null || { echo "npm not found: the TypeScript client needs Node.js 20 or later" >&2; exit 1; }
	cd clients/typescript && npm ci --no-audit --no-fund && npm run build
	cd clients/typescript && env -u DATABASE_URL -u REDIS_URL -u MAKEFLAGS GATEWAY_PYTHON=$(abspath $(PY)) npm test

# The fault-injection suite (tests/faults): it starts, kills and restarts its own PostgreSQL
# cluster, Redis and gateway processes, so it runs once, apart from the two runs above, and
# alone: its scenarios measure recovery times and deadlines.
test-faults:
	$(PYTEST) tests/faults -m faults -p no:cacheprovider

# The performance goal (bench/README.md): the peer (LangGraph, in-process), our full cycle over
# HTTP, worker and socket on PostgreSQL + Redis, the peer again, and the ratio.
PEERS ?= ../shared/peers
bench-compare: setup
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) bench/compare.py --peers $(PEERS)

# MCP tool calls through /mcp/<name> against the same upstream called directly, and a gated
# call's decision to its result at the client (bench/README.md, issue 30).
bench-mcp: setup
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) bench/mcp_proxy.py

# ruff, the layers of ARCHITECTURE.md (import-linter's contracts in pyproject.toml), then mypy
# on the modules [tool.mypy] names (its cache in .mypy_cache).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	env -u DATABASE_URL -u REDIS_URL $(VENV)/bin/mypy

clean:
	rm -rf $(VENV) var test-artifacts site
