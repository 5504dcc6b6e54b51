"""Settings, read from the environment through strict helpers (docs/settings.md)."""

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
import limits
from django.core.exceptions import ImproperlyConfigured

from infra import dbpool

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default)
    if value not in ("true", "false"):
        raise ImproperlyConfigured(f"{name} must be 'true' or 'false', not {value!r}")
    return value == "true"


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as e:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}") from e


def envtimeout(name: str, default: float) -> float:
    """A time limit in seconds: a number more than 0 (fractions allowed, for tests)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError as e:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, not {value!r}") from e
    if not 0 < seconds < float("inf"):
        raise ImproperlyConfigured(f"{name} must be more than 0 seconds, not {value!r}")
    return seconds


def envrate(name: str, default: str) -> str:
    """A rate limit in the `limits` notation (access.ratelimits), checked now."""
    value = os.environ.get(name, default).strip()
    try:
        limits.parse_many(value) if value else None
    except ValueError as e:
        raise ImproperlyConfigured(
            f"{name} must be a rate such as '120/minute' (several joined by ';'), not {value!r}"
        ) from e
    return value


def envstr(name: str, default: str = "") -> str:
    """A value from NAME, or from the file named by NAME_FILE (for secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, default)


DATA_DIR = Path(os.environ.get("GATEWAY_DATA_DIR", BASE_DIR / "var")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    key = envstr("SECRET_KEY")
    if key:
        return key
    # Local use: a key made once and kept beside the data, so sessions survive restarts.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", "false")
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]
SITE_URL = os.environ.get("SITE_URL", "http://localhost:8000")


def _origins(name: str, default: list[str]) -> list[str]:
    """Exact origins (scheme://host[:port]) from a comma-separated variable. A bare host or a
    wildcard would let a page on another port or scheme in (access.auth.SiteOriginValidator
    compares all three), so they are refused rather than read generously."""
    raw = os.environ.get(name)
    values = [o.strip() for o in raw.split(",") if o.strip()] if raw is not None else default
    origins = []
    for value in values:
        scheme, sep, host = value.rstrip("/").partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not host or "/" in host:
            raise ImproperlyConfigured(
                f"{name}: {value!r} is not an origin such as https://gateway.example.com"
            )
        if "*" in host or host.startswith("."):
            raise ImproperlyConfigured(f"{name}: {value!r}: name each origin, no wildcards")
        origins.append(f"{scheme.lower()}://{host.lower()}")
    return origins


def _site_origins() -> list[str]:
    """SITE_URL's origin and CSRF_TRUSTED_ORIGINS (a wildcard one is left out: name those in
    WEBSOCKET_ALLOWED_ORIGINS). A loopback SITE_URL counts under each loopback name: a person
    may open http://localhost:8000 or http://127.0.0.1:8000, one server on one port."""
    site = urlsplit(SITE_URL)
    origins = [f"{site.scheme}://{site.netloc}"]
    if site.hostname in ("localhost", "127.0.0.1", "::1"):
        port = f":{site.port}" if site.port else ""
        origins += [f"{site.scheme}://{name}{port}" for name in ("localhost", "127.0.0.1", "[::1]")]
    origins += [o for o in CSRF_TRUSTED_ORIGINS if "*" not in o]
    return list(dict.fromkeys(origins))


# Pages allowed to open the events socket with a reviewer's session (a browser sends its
# cookies to any page's socket; token-authenticated sockets skip the check).
WEBSOCKET_ALLOWED_ORIGINS = _origins("WEBSOCKET_ALLOWED_ORIGINS", _site_origins())

# Without daphne's app: it only replaces runserver (unused: `manage.py serve` starts daphne
# itself) and imports Twisted and autobahn into every process that sets Django up, the
# workers included (bench/footprint.py).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "csp",
    "demo",
    "agents",
    "access",
    "approvals",
    "a2a_server",
    "mcp_gateway",
    "slack_approvals",
    "presence",
    "notify",
    "webhooks",
    "webpush",
    "metrics",
    "gateway",  # `manage.py serve`
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "gateway.urls"
ASGI_APPLICATION = "gateway.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.limits.limits",
                "slack_approvals.views.navigation",
                "gateway.context.project",
            ],
        },
    },
]

DATABASE_URL = envstr("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Under ASGI every request runs in a thread of its own, so persistent connections
        # would pile up until PostgreSQL refuses clients: a small pool per process instead.
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": envint("DATABASE_POOL_SIZE", 8),
            # How long a request or step waits for a connection before it fails (500, or the
            # task's retry): long enough for a busy pool, short enough to say so.
            "timeout": 10,
        }
        # A pooled connection is checked as it leaves the pool: after PostgreSQL restarts,
        # the dead ones are replaced at once instead of failing or delaying a request each.
        DATABASES["default"]["ENGINE"] = "infra.postgresql"
        # Values sent apart from the SQL, and a statement a connection runs again prepared on
        # the server: PostgreSQL then parses and plans it once per connection, not at every
        # run, a large part of its CPU per approval cycle (bench/README.md). Django
        # turns both off by default for transaction-mode poolers such as PgBouncer before
        # 1.21, which cannot keep a prepared statement: DATABASE_PREPARE_THRESHOLD= (empty)
        # turns preparing off there.
        DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
        DATABASES["default"]["OPTIONS"]["prepare_threshold"] = (
            envint("DATABASE_PREPARE_THRESHOLD", 1)
            if os.environ.get("DATABASE_PREPARE_THRESHOLD", "1") != ""
            else None
        )
        dbpool.steady_reconnects()
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "gateway.sqlite3"}
    }

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the server and the workers read while one of them writes; IMMEDIATE
    # transactions take the write lock up front, so two writers queue instead of deadlocking.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The test database must be a file: the worker process opens it too.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("GATEWAY_TEST_SQLITE", str(DATA_DIR / "test.sqlite3"))
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# Login throttling (django-axes) on /login/ and /admin/login/. The throttle backend comes first
# so a locked-out login never reaches the password check. API tokens do not pass through
# authenticate(), so they are not throttled here.
AUTHENTICATION_BACKENDS = [
    "access.lockout.LoginThrottleBackend",
    # ModelBackend with a user's permissions read in one statement (approvals/permbackend.py).
    "access.permbackend.OneQueryModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15))
# A username from one address: an attacker locks out only their own guesses at one account,
# never the account's owner elsewhere nor everyone behind the attacker's address.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "approvals/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The client address is REMOTE_ADDR (axes' default): behind a proxy, `serve --proxy-headers`
# (or PROXY_HEADERS=true) makes it the client's, read from X-Forwarded-For only when the peer is
# one of TRUSTED_PROXIES (addresses or networks), so no header a client sends itself counts
# (infra.forwarded, wrapped around the app by gateway.asgi).
PROXY_HEADERS = envbool("PROXY_HEADERS", "false")
TRUSTED_PROXIES = [
    p.strip() for p in os.environ.get("TRUSTED_PROXIES", "127.0.0.1,::1").split(",") if p.strip()
]

# Content-Security-Policy (django-csp) on every answer. Pages load only their own scripts and
# styles from static/ (no inline script, style attribute or eval), so nothing inline is allowed.
# The socket's ws:/wss: origin is named as well as 'self', which older browsers do not stretch
# to WebSocket URLs.
_SITE_HOST = SITE_URL.split("://", 1)[-1].split("/", 1)[0]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'", f"ws://{_SITE_HOST}", f"wss://{_SITE_HOST}"],
        "object-src": ["'none'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
    }
}

# HTTPS. Off by default so `make run` works over plain HTTP; docs/security.md's "Production
# over HTTPS" lists the values a deployment sets (tests/approvals/test_deploy_settings.py
# checks them with `manage.py check --deploy`).
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "false")
# A load balancer's health probe often speaks plain HTTP to the backend; a redirect would read
# as unhealthy. /healthz and /readyz tell nothing secret, so they answer over either.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "false")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "false")
SESSION_COOKIE_HTTPONLY = envbool("SESSION_COOKIE_HTTPONLY", "true")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "false")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "false")
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients).
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if envbool("SECURE_PROXY_SSL_HEADER", "false") else None
)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = os.environ.get("SECURE_REFERRER_POLICY", "same-origin")
X_FRAME_OPTIONS = "DENY"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `collectstatic` writes here; an image collects them at build time, outside its data volume
# (Dockerfile: STATIC_ROOT=/app/staticfiles), so an upgrade never serves the old ones.
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", DATA_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True

REDIS_URL = envstr("REDIS_URL")
# What this gateway's keys in Redis begin with (the channel layer's groups, the rate limits'
# counters in access.ratelimits): gateways, or test runs, sharing a Redis database never read
# each other's.
GATEWAY_PREFIX = os.environ.get("GATEWAY_PREFIX", "gw")

if REDIS_URL:
    # channels_redis's pub/sub layer: a group_send is one PUBLISH, where the core layer runs a
    # Lua script over a sorted set of members and each receive pops a list with a backup copy.
    # Every committed event sends one wake-up, so this is on the hot path (bench/README.md).
    # Nothing here needs the core layer's buffering: a wake-up that finds no listener is
    # covered by the hubs' safety polls either way.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": GATEWAY_PREFIX},
        }
    }
else:
    # No Redis: the socket consumer tails the Event table instead of waiting for a wake-up.
    CHANNEL_LAYERS = {}

# Celery: Redis when configured; otherwise kombu's filesystem transport, which needs no
# server and is shared by every process on the machine through DATA_DIR.
BROKER_DIR = DATA_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT = "infra.broker:RedisTransport"  # one client per channel
    # An unacknowledged task (its worker died) is delivered again after this long; the
    # sweeper re-enqueues a stalled thread long before (STALLED_AFTER_SECONDS).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": envint("BROKER_VISIBILITY_TIMEOUT", 3600)
    }
else:
    for sub in ("out", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    # A host name, though the folders below say where: without one kombu warns "No hostname
    # was supplied" at every connection of every process.
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT = "infra.broker:Transport"  # whole-file writes (infra/broker.py)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # A consumer waits on inotify for a message file (infra.broker); kombu's poll, every
        # this many seconds, is left where that cannot help (no inotify; a threads or prefork
        # worker waiting for a free slot), and keeps their latency as it was.
        "polling_interval": 0.05,
    }
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("GATEWAY_QUEUE", "gateway")
# Deadlines and the sweeper have a queue (and, under `manage.py serve`, a worker) of their own,
# so a timeout is never stuck behind a backlog of runs.
CELERY_DEADLINE_QUEUE = os.environ.get("DEADLINE_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-deadlines")
# The beat lease's name in Redis (infra.beat_lease): one per deployment sharing a Redis.
BEAT_LEASE_KEY = f"{CELERY_TASK_DEFAULT_QUEUE}:beat-lease"
CELERY_TASK_ROUTES = {
    "agents.tasks.sweep": {"queue": CELERY_DEADLINE_QUEUE},
    "agents.tasks.expire_suspension": {"queue": CELERY_DEADLINE_QUEUE},
    "agents.tasks.expire_input": {"queue": CELERY_DEADLINE_QUEUE},
    "mcp_gateway.tasks.sweep": {"queue": CELERY_DEADLINE_QUEUE},
}
CELERY_TASK_IGNORE_RESULT = True
# No result backend is set, so Celery's is the stateless DisabledBackend; this says it may be
# shared between threads. Without it Celery keeps one per thread and builds it again (scanning
# the installed packages' entry points) in each new thread: a request's thread in daphne
# paid that on every task it sent (bench/README.md).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# How a worker runs its tasks. `solo` (the default): one at a time, in the process that takes
# them from the broker; `manage.py serve` then starts one run worker per step at once
# (WORKER_CONCURRENCY). Against one prefork worker with as many children, that spares the
# parent passing each message to a child over a pipe and back, and runs more approval cycles
# per second (bench/README.md). `threads` runs them in threads of one process (less CPU per
# task, but its one GIL leaves the machine idle under load); `prefork` in forked children of
# one worker.
CELERY_WORKER_POOL = os.environ.get("WORKER_POOL", "solo")
# Each kind of task's soft and hard time limits, in seconds. Celery applies them under the
# prefork pool only (a soft limit raises SoftTimeLimitExceeded in the task, a hard one ends
# the child); under solo and threads they are not applied, and a tool call is bounded by
# TOOL_TIME_LIMIT_SECONDS whatever the pool. Runs: one task runs a thread until it pauses, so
# several model calls and tools. Sweeps: the clock's periodic work. Deliveries: one webhook, push
# or email (a webhook's POST is bounded by WEBHOOKS_DELIVERY_TIMEOUT_SECONDS).
TASK_KINDS = {
    "RUN": (
        "agents.tasks.start_thread",
        "agents.tasks.resume_thread",
        "agents.tasks.run_instance",
        "mcp_gateway.tasks.call_upstream",
    ),
    "SWEEP": (
        "agents.tasks.sweep",
        "agents.tasks.expire_suspension",
        "agents.tasks.expire_input",
        "notify.tasks.dispatch",
        "webhooks.tasks.sweep",
        "webhooks.tasks.fan_out",
        "mcp_gateway.tasks.sweep",
        "slack_approvals.tasks.fan_out",
        "slack_approvals.tasks.sweep",
        "webpush.tasks.fan_out",
        "webpush.tasks.sweep",
    ),
    "DELIVERY": (
        "webhooks.tasks.deliver",
        "notify.tasks.send_email",
        "slack_approvals.tasks.deliver",
        "webpush.tasks.deliver",
        # One reviewing model's call (agents.reviewing), bounded by its setting's timeout.
        "agents.tasks.review_suspension",
    ),
}
TASK_TIME_LIMITS = {"RUN": (1800, 1860), "SWEEP": (60, 90), "DELIVERY": (90, 120)}
for _kind, (_soft, _hard) in list(TASK_TIME_LIMITS.items()):
    _soft = envtimeout(f"{_kind}_TASK_SOFT_TIME_LIMIT", _soft)
    _hard = envtimeout(f"{_kind}_TASK_TIME_LIMIT", _hard)
    if _soft >= _hard:
        raise ImproperlyConfigured(
            f"{_kind}_TASK_SOFT_TIME_LIMIT ({_soft:g}) must be less than "
            f"{_kind}_TASK_TIME_LIMIT ({_hard:g}): the soft limit lets the task end itself"
        )
    TASK_TIME_LIMITS[_kind] = (_soft, _hard)
CELERY_TASK_ANNOTATIONS = {
    name: {"soft_time_limit": TASK_TIME_LIMITS[kind][0], "time_limit": TASK_TIME_LIMITS[kind][1]}
    for kind, names in TASK_KINDS.items()
    for name in names
}
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# The engine.
ANTHROPIC_API_KEY = envstr("ANTHROPIC_API_KEY")
# Where the Messages API is answered (a proxy, a gateway of the company); empty: Anthropic's.
# The SDK reads the same variable for the agents' calls; the reviewing model
# (agents.reviewing.answers) is given it.
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")
ANTHROPIC_MAX_RETRIES = envint("ANTHROPIC_MAX_RETRIES", 2)
ANTHROPIC_TIMEOUT = envint("ANTHROPIC_TIMEOUT", 120)
AGENT_MAX_TOKENS = envint("AGENT_MAX_TOKENS", 4096)
# A worker's hold on a thread lasts this long unless renewed; a heartbeat renews it every third
# of it while the worker is alive, so a dead worker's threads are taken over within seconds
# (invariant 3; agents.leases.Heartbeat).
THREAD_LEASE_SECONDS = envint("THREAD_LEASE_SECONDS", 10)
# A thread that should run but has not been picked up for this long is enqueued again.
STALLED_AFTER_SECONDS = envint("STALLED_AFTER_SECONDS", 5)
# How often the clock runs the sweeper while anything is in motion (a run to take, a cancel
# settling); with nothing in motion it sleeps until the next stored due time (a deadline, a
# reminder, an input's timeout, a grant's end), at most SWEEP_IDLE_SECONDS, and the channels'
# rounds (webhooks, email, Slack, Web Push, MCP) come six times as far apart while no event is
# new (gateway.clock, agents.due). A deadline raised SWEEP_IDLE_SECONDS away or sooner gets a task
# of its own, due at that moment, as it may fall while the clock sleeps.
SWEEP_INTERVAL_SECONDS = float(os.environ.get("SWEEP_INTERVAL_SECONDS", "1"))
SWEEP_IDLE_SECONDS = float(os.environ.get("SWEEP_IDLE_SECONDS", "10"))
# A process reads the current receipt signing key this often, not at every decision: after
# manage.py rotate_receipt_key another machine signs with the old key (still published) for at
# most this long (agents.receipt_keys). 0: read at every signing.
RECEIPT_KEY_CACHE_SECONDS = envint("RECEIPT_KEY_CACHE_SECONDS", 60)
# One clock runs the sweeps at a time, whatever the number of machines: it holds a lease of this
# many seconds, renewed every third of it; a clock that dies or hangs loses it, and a waiting one
# takes over within this time (gateway.clock, infra.beat_lease). Keep the machines' clocks
# synchronised.
BEAT_LEASE_SECONDS = envint("BEAT_LEASE_SECONDS", 15)
# /readyz answers 503 when the sweeper has not run for this long (no clock, or its worker dead).
# The clock sleeps at most SWEEP_IDLE_SECONDS: keep this well above that.
SWEEP_STALE_SECONDS = envint("SWEEP_STALE_SECONDS", 60)
DEFAULT_BLOCKING_TIMEOUT = envint("DEFAULT_BLOCKING_TIMEOUT", 3600)
# One tool call may run this long; past it the call is stopped where it waits, the model gets
# an error result for it, and the run goes on (agents.runtime.time_limit says why this is not
# Celery's soft limit).
TOOL_TIME_LIMIT_SECONDS = envtimeout("TOOL_TIME_LIMIT_SECONDS", 300)
# Modules that register the deployment's own tools when imported (comma-separated).
TOOL_MODULES = [m for m in os.environ.get("TOOL_MODULES", "").split(",") if m.strip()]

# Input limits of the API and the pages (approvals/api/, approvals/forms.py): one oversized
# message or decision would otherwise travel into every event, socket and page that shows it.
MAX_MESSAGE_CHARS = envint("MAX_MESSAGE_CHARS", 32000)  # a run's message, a reply, an answer
MAX_REASON_CHARS = envint("MAX_REASON_CHARS", 2000)  # a decision's reason
MAX_ARGUMENTS_BYTES = envint("MAX_ARGUMENTS_BYTES", 64 * 1024)  # edited arguments, as JSON
# Display limits (approvals.excerpt): what a page, an email or an A2A status text shows of one
# untrusted value, and of a card's arguments in all; the rest is one link away, over the API.
DISPLAY_MAX_VALUE_BYTES = envint("DISPLAY_MAX_VALUE_BYTES", 4 * 1024)
DISPLAY_MAX_CARD_BYTES = envint("DISPLAY_MAX_CARD_BYTES", 32 * 1024)
# A reviewer's claim on a pending request ("Dana is reviewing") lapses after this long (presence/).
CLAIM_SECONDS = envint("CLAIM_SECONDS", 300)
# A reviewer may move a pending request's deadline once, by at most this much (agents.reminders).
MAX_EXTENSION_SECONDS = envint("MAX_EXTENSION_SECONDS", 3600)
# A standing grant (agents.grants) lives at most this long, and approves at most this many.
MAX_GRANT_SECONDS = envint("MAX_GRANT_SECONDS", 8 * 3600)
MAX_GRANT_USES = envint("MAX_GRANT_USES", 1000)

# Limits on abuse (access.ratelimits, access.admission). A rate is in the `limits`
# notation, "120/minute" or several joined by ";" ("10/second;120/minute"); empty: no limit.
RATE_LIMIT_RUNS = envrate("RATE_LIMIT_RUNS", "120/minute")  # runs one token may start
RATE_LIMIT_USER_RUNS = envrate("RATE_LIMIT_USER_RUNS", "600/minute")  # one user, all tokens
RATE_LIMIT_DECISIONS = envrate("RATE_LIMIT_DECISIONS", "120/minute")  # decisions of one token
RATE_LIMIT_USER_DECISIONS = envrate("RATE_LIMIT_USER_DECISIONS", "600/minute")  # of one user
# Direct messages one user may have Slack send to link an account (slack_approvals.connect):
# each goes to a Slack member id they typed, so it is kept low.
RATE_LIMIT_SLACK_CONNECT = envrate("RATE_LIMIT_SLACK_CONNECT", "5/hour")
# Requests of one agent waiting for a person (and its runs still working) past which no run
# of it starts; 0: no cap.
MAX_PENDING_PER_AGENT = envint("MAX_PENDING_PER_AGENT", 1000)

# Email to reviewers (notify/): new requests, reminders and escalations. EMAIL_HOST switches
# on SMTP; without it (`make run`) the console shows the emails the gateway would send.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "false")
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "false")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "Approval gateway <gateway@localhost>")
# How often the clock turns new events into emails and sends again those whose sending failed.
NOTIFY_INTERVAL_SECONDS = float(os.environ.get("NOTIFY_INTERVAL_SECONDS", "1"))

# Replies to an agent that waits for input (agents.replies.provide_input); an agent file may
# set its own (input_max_chars, input_types, input_timeout, on_input_timeout).
INPUT_MAX_CHARS = envint("INPUT_MAX_CHARS", MAX_MESSAGE_CHARS)
INPUT_TYPES = [
    t.strip()
    for t in os.environ.get("INPUT_TYPES", "text/plain,application/json").split(",")
    if t.strip()
]
INPUT_TIMEOUT_SECONDS = envint("INPUT_TIMEOUT_SECONDS", 0)  # 0: a thread waits for input forever


def envseconds(name: str, default: str) -> list[float]:
    """Durations in seconds from a comma-separated variable ("5,30,120")."""
    raw = os.environ.get(name) or default
    try:
        values = [float(v) for v in raw.split(",") if v.strip()]
    except ValueError as e:
        raise ImproperlyConfigured(
            f"{name} must be seconds separated by commas, not {raw!r}"
        ) from e
    if not values or any(v < 0 for v in values):
        raise ImproperlyConfigured(f"{name} must list at least one duration of 0 or more seconds")
    return values


# Webhooks and A2A push notifications (webhooks/). Deliveries are retried after each of these
# waits in turn (with jitter; about 28 hours in all), then dead-lettered.
WEBHOOKS_RETRY_SCHEDULE = envseconds(
    "WEBHOOKS_RETRY_SCHEDULE", "5,30,120,600,1800,3600,7200,14400,28800,43200"
)
# A subscription whose last N finished deliveries were all dead-lettered is disabled.
WEBHOOKS_DISABLE_AFTER = envint("WEBHOOKS_DISABLE_AFTER", 5)
WEBHOOKS_TIMEOUT_SECONDS = envint("WEBHOOKS_TIMEOUT_SECONDS", 10)  # connect, send, read: each
# A whole delivery, from connect to the last byte kept: a receiver that trickles its answer
# would hold a worker for as long as it likes under the per-phase timeouts alone.
WEBHOOKS_DELIVERY_TIMEOUT_SECONDS = envtimeout("WEBHOOKS_DELIVERY_TIMEOUT_SECONDS", 30)
# URLs that resolve to private, loopback, link-local or multicast addresses are refused, at
# subscribe time and again at every delivery, unless this is true (tests; a closed network).
WEBHOOKS_ALLOW_PRIVATE = envbool("WEBHOOKS_ALLOW_PRIVATE", "false")
# How often the clock fans new events out to deliveries and sends the retries that are due.
WEBHOOKS_SWEEP_INTERVAL_SECONDS = float(os.environ.get("WEBHOOKS_SWEEP_INTERVAL_SECONDS", "1"))
# The clock's periodic work (gateway.clock): each task, by name, every so many seconds while
# the gateway is busy, or while rows of `busy_while` (a model, and a filter) exist: a delivery
# still to make, an MCP call being made, which a dead worker may have left behind. With
# nothing in motion, no new event and no such row, every 6 × SWEEP_IDLE_SECONDS; the sweeper
# when something falls due (agents.due).
CLOCK_JOBS: dict[str, dict[str, Any]] = {
    "sweep": {"task": "agents.tasks.sweep", "every": SWEEP_INTERVAL_SECONDS},
    "notify": {
        "task": "notify.tasks.dispatch",
        "every": NOTIFY_INTERVAL_SECONDS,
        "busy_while": ("notify.Email", {"status": "pending"}),
    },
    "mcp": {
        "task": "mcp_gateway.tasks.sweep",
        "every": SWEEP_INTERVAL_SECONDS,
        "busy_while": ("mcp_gateway.UpstreamCall", {"state": "claimed"}),
    },
    "webhooks-sweep": {
        "task": "webhooks.tasks.sweep",
        "every": WEBHOOKS_SWEEP_INTERVAL_SECONDS,
        "busy_while": ("webhooks.Delivery", {"status": "pending"}),
    },
    # Slack's posts and updates that no nudge sent, and its retries (slack_approvals.tasks);
    # it does nothing while Slack is off.
    "slack-sweep": {
        "task": "slack_approvals.tasks.sweep",
        "every": 5.0,
        "busy_while": ("slack_approvals.SlackDelivery", {"status": "pending"}),
    },
}

# The port of the demo MCP server `manage.py serve --demo` (make run) starts: 0 keeps
# demo/agents.yaml's; tests that run make run side by side give each its own (demo.serving).
DEMO_MCP_PORT = envint("DEMO_MCP_PORT", 0)

# Prometheus scrapes /metrics with `Authorization: Bearer <METRICS_TOKEN>`; unset, /metrics is
# off and answers 404 (metrics.views).
METRICS_TOKEN = envstr("METRICS_TOKEN")

# plain: one readable line per record (`make run`); json: one JSON object per line with the
# thread, suspension, frame and task ids the record is about (infra.logs).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be 'plain' or 'json', not {LOG_FORMAT!r}")

# LOG_LEVEL unset (`make run`): the gateway's own lines from INFO, and from the libraries under
# it only what needs a person: daphne's and the MCP SDK's INFO lines (daphne's HTTP/2 notice,
# "Terminating session" after every MCP call) are left out, and so are Django's lines about
# the 4xx answers the API gives by design (a 409 on a request decided already is the
# caller's to read). Set (`LOG_LEVEL=INFO`, or `manage.py serve -v 2`): that level for every
# logger, those included.
LOG_LEVEL = os.environ.get("LOG_LEVEL", "").upper()
_QUIET: dict[str, dict[str, object]] = (
    {}
    if LOG_LEVEL
    else {
        "daphne": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
        "django.request": {"filters": ["no_client_errors"]},
    }
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "infra.logs.JsonLines"},
    },
    "filters": {
        "ids": {"()": "infra.logs.ContextFilter"},
        "no_client_errors": {"()": "infra.logs.NoClientErrors"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["ids"]}
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL or "INFO"},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        # django-axes says "BEGIN" at every start of every command.
        "axes.apps": {"level": "WARNING"},
        # The HTTP clients log every request at INFO: a line per relayed MCP call.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        **_QUIET,
    },
}

# MCP (mcp_gateway): how long a gated tools/call is held waiting for a decision before it
# answers "pending" (a retry attaches to the same request), below common client timeouts; and
# how long an upstream's tools/list is kept.
MCP_HOLD_SECONDS = envint("MCP_HOLD_SECONDS", 50)
MCP_TOOLS_CACHE_SECONDS = envint("MCP_TOOLS_CACHE_SECONDS", 30)
# An approved call is made by a worker holding a lease on it, renewed every third of this while
# the upstream works; a claim whose lease ran out (its worker died) is finished as interrupted
# by the sweep, never called twice (mcp_gateway.runner). The most one upstream call may take.
MCP_CALL_LEASE_SECONDS = envint("MCP_CALL_LEASE_SECONDS", 10)
MCP_CALL_TIMEOUT_SECONDS = envint("MCP_CALL_TIMEOUT_SECONDS", 600)
# Browser pages allowed to call /mcp (an Origin header from any other is refused, against DNS
# rebinding: mcp_gateway.proxy); clients that send no Origin are not browsers and pass.
MCP_ALLOWED_ORIGINS = _origins("MCP_ALLOWED_ORIGINS", _site_origins())


def _passkey_rp_id() -> str:
    """The WebAuthn relying party's id: SITE_URL's host name. Browsers take no IP address as
    one, so a loopback SITE_URL's passkeys belong to localhost (open the site as localhost)."""
    host = urlsplit(SITE_URL).hostname or "localhost"
    return "localhost" if host in ("127.0.0.1", "::1") else host


# Passkeys (access.passkeys, the step_up policy): the relying party's id, and the page origins
# whose WebAuthn answers are taken (an answer signed for another origin is refused).
PASSKEY_RP_ID = os.environ.get("PASSKEY_RP_ID") or _passkey_rp_id()
PASSKEY_ORIGINS = _origins("PASSKEY_ORIGINS", _site_origins())
# How long a passkey ceremony's challenge may be answered (it is kept in the session, once).
PASSKEY_CHALLENGE_SECONDS = envint("PASSKEY_CHALLENGE_SECONDS", 120)

# Slack (slack_approvals): the bot's token and the app's signing secret; Slack is off (nothing
# is posted, /slack/interactions answers 404) unless both are set. SLACK_API_URL is the Web
# API's address (the client's base_url): Slack's own, or a proxy's, or the tests' stand-in.
# SLACK_LINK_BY_EMAIL links a Slack user to the one active gateway user with their verified
# email address.
SLACK_BOT_TOKEN = envstr("SLACK_BOT_TOKEN")
SLACK_SIGNING_SECRET = envstr("SLACK_SIGNING_SECRET")
SLACK_API_URL = os.environ.get("SLACK_API_URL", "https://slack.com/api/")
SLACK_LINK_BY_EMAIL = envbool("SLACK_LINK_BY_EMAIL", "false")

# Web Push to reviewers' devices (webpush/). The VAPID key signs every push (RFC 8292): a P-256
# private key, PEM or base64url (`vapid --gen`); unset, one is made on first use and kept in the
# database. The subject is where push services reach the sender (mailto: or https:); unset,
# SITE_URL when https, else DEFAULT_FROM_EMAIL's address. A browser's subscription is taken
# only at the push services named here (a name matches its subdomains): the gateway POSTs to
# its endpoint, so no page may point it elsewhere.
WEBPUSH_VAPID_PRIVATE_KEY = envstr("WEBPUSH_VAPID_PRIVATE_KEY")
WEBPUSH_VAPID_SUBJECT = os.environ.get("WEBPUSH_VAPID_SUBJECT", "")
WEBPUSH_PUSH_SERVICES = [
    name.strip()
    for name in os.environ.get(
        "WEBPUSH_PUSH_SERVICES",
        "fcm.googleapis.com,push.services.mozilla.com,push.apple.com,notify.windows.com",
    ).split(",")
    if name.strip()
]
WEBPUSH_TIMEOUT_SECONDS = envtimeout("WEBPUSH_TIMEOUT_SECONDS", 10)
# The pushes no nudge sent, and the retries that are due (webpush.tasks.sweep).
CLOCK_JOBS["webpush-sweep"] = {
    "task": "webpush.tasks.sweep",
    "every": 5.0,
    "busy_while": ("webpush.Push", {"status": "pending"}),
}


# OpenID Connect sign-in (sso/, docs/sso.md): on when OIDC_ISSUER and OIDC_CLIENT_ID are set.
# The provider's endpoints and keys come from its discovery document, read from the issuer.
def _oidc_issuer() -> str:
    """The issuer's URL: https, or http to a loopback address (a provider on this machine)."""
    value = os.environ.get("OIDC_ISSUER", "").strip()
    if not value:
        return ""
    parts = urlsplit(value)
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
        raise ImproperlyConfigured(
            f"OIDC_ISSUER must be an https URL (http only on a loopback address), not {value!r}"
        )
    return value


def _group_map(raw: str) -> dict[str, list[str]]:
    """OIDC_GROUP_MAP: PROVIDER=GATEWAY pairs separated by commas, which gateway group each
    provider group gives (a provider group may give several)."""
    table: dict[str, list[str]] = {}
    for pair in raw.split(","):
        if not pair.strip():
            continue
        provider, sep, gateway = pair.rpartition("=")
        if not sep or not provider.strip() or not gateway.strip():
            raise ImproperlyConfigured(
                "OIDC_GROUP_MAP must be PROVIDER_GROUP=GATEWAY_GROUP pairs separated by commas, "
                f"not {pair!r}"
            )
        table.setdefault(provider.strip(), []).append(gateway.strip())
    return table


OIDC_ISSUER = _oidc_issuer()
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "").strip()
OIDC_CLIENT_SECRET = envstr("OIDC_CLIENT_SECRET")
# The button's words: "Sign in with <OIDC_PROVIDER_NAME>".
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "").strip() or "SSO"
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "openid email profile").split()
# The claim that lists the person's groups at the provider; empty: groups are kept in the
# admin, not taken from the provider. With OIDC_GROUP_MAP, only the groups it names count;
# without, a provider group counts when a gateway group has its name.
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups").strip()
OIDC_GROUP_MAP = _group_map(os.environ.get("OIDC_GROUP_MAP", ""))
# true: no password sign-in (the login form, the admin's) but for the usernames in
# OIDC_BREAK_GLASS (comma-separated), the administrators' way in when the provider is down.
OIDC_ONLY = envbool("OIDC_ONLY", "false")
OIDC_BREAK_GLASS = [
    u.strip() for u in os.environ.get("OIDC_BREAK_GLASS", "").split(",") if u.strip()
]
# Each call to the provider (discovery, keys, token) gives up after this long.
OIDC_TIMEOUT_SECONDS = envtimeout("OIDC_TIMEOUT_SECONDS", 10)
if OIDC_ISSUER and not OIDC_CLIENT_ID:
    raise ImproperlyConfigured("OIDC_ISSUER is set: set OIDC_CLIENT_ID too")
if "openid" not in OIDC_SCOPES:
    raise ImproperlyConfigured(f"OIDC_SCOPES must include openid, not {OIDC_SCOPES!r}")
if OIDC_ONLY and not OIDC_ISSUER:
    raise ImproperlyConfigured("OIDC_ONLY=true turns passwords off: set OIDC_ISSUER first")
INSTALLED_APPS.insert(INSTALLED_APPS.index("gateway"), "sso")
# Before the password check: with OIDC_ONLY it refuses every password but break-glass ones.
AUTHENTICATION_BACKENDS.insert(1, "sso.passwords.PasswordsOff")
if OIDC_ISSUER:
    # Sign-out's form is answered with a redirect to the provider's end-session endpoint, and
    # browsers hold a form's redirects to form-action: the issuer's origin is allowed there.
    _issuer = urlsplit(OIDC_ISSUER)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        f"{_issuer.scheme}://{_issuer.netloc}"
    )
