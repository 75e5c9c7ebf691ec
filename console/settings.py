"""Settings, read from environment variables only.

Every setting has a tiny typed reader that fails loudly on a malformed value. Unset means the
embedded default: SQLite and local storage in the data dir, an in-process executor and an
in-memory channel layer. Secrets can be given as ``NAME_FILE`` (a path whose content is used).
"""

import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from aiconsole import datadir, proxies, secret_env

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str | None = None) -> str | None:
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_path}: {exc}") from exc
    value = secret_env.lookup(name)  # the environment, or the pipe secrets came through
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = env_str(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = env_str(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_float(name: str, default: float) -> float:
    value = env_str(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


# --- Where things live -----------------------------------------------------------------------

# Computed only: the entry points make the data dir ready (aiconsole.datadir.prepare).
DATA_DIR = datadir.location()

# Where uploaded packages and local job dirs go by default.
STORAGE_DIR = Path(env_str("AICONSOLE_STORAGE_DIR", str(DATA_DIR / "storage"))).resolve()
# Local paths users may name (packageUris, jobDir, deploymentUri, batch paths): a project's own
# <STORAGE_DIR>/<folder>/<project>/ area, or these extra roots, which every project shares.
STORAGE_ROOTS = [Path(p).expanduser().resolve() for p in env_list("AICONSOLE_STORAGE_ROOTS", [])]
STORAGE_ROOTS = [STORAGE_DIR, *[p for p in STORAGE_ROOTS if p != STORAGE_DIR]]
# Per-job working files: fetched packages, replica working directories.
WORK_DIR = Path(env_str("AICONSOLE_WORK_DIR", str(DATA_DIR / "work"))).resolve()
# Cached Python environments (runtime stacks and per-job layers), keyed by content hash.
ENV_DIR = Path(env_str("AICONSOLE_ENV_DIR", str(DATA_DIR / "envs"))).resolve()

# --- Security ----------------------------------------------------------------------------------

DEBUG = env_bool("AICONSOLE_DEBUG", False)


def _secret_key() -> str:
    configured = env_str("AICONSOLE_SECRET_KEY")
    if configured:
        return configured
    # Embedded default: a random key generated once (by the entry points) and kept in the data dir.
    return datadir.secret_key(DATA_DIR)


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("AICONSOLE_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("AICONSOLE_CSRF_TRUSTED_ORIGINS", [])
SECURE = env_bool("AICONSOLE_SECURE", False)  # behind TLS: secure cookies, HSTS, redirects
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE
SECURE_HSTS_SECONDS = 31536000 if SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE
SECURE_HSTS_PRELOAD = SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Reverse proxies (addresses or networks) whose X-Forwarded-For names the client (aiconsole/proxies.py):
# sign-in throttling and the audit log then see the client's address. Unset: the header is ignored.
TRUSTED_PROXIES = env_list("AICONSOLE_TRUSTED_PROXIES", [])
try:
    proxies.parse_networks(TRUSTED_PROXIES)
except ValueError as error:
    raise ImproperlyConfigured(f"AICONSOLE_TRUSTED_PROXIES: {error}") from None

# --- Applications -------------------------------------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "django_htmx",
    "template_partials",
    "axes",  # before "aiconsole": its failed sign-in receiver runs first (aiconsole/signin.py)
    "aiconsole",
    "jobs",
    "models_registry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "aiconsole.middleware.RequestIdMiddleware",
    "aiconsole.middleware.NulRefusalMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "aiconsole.middleware.IamErrorMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "console.urls"
ASGI_APPLICATION = "console.asgi.application"
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
                "aiconsole.context_processors.console",
            ],
        },
    },
]

# --- Database ------------------------------------------------------------------------------------

DATABASE_URL = env_str("AICONSOLE_DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Every request runs on a thread of its own under ASGI, so a connection kept per thread
        # (CONN_MAX_AGE) would never serve a second request: the process keeps a pool instead.
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("AICONSOLE_DATABASE_POOL_SIZE", 20, minimum=2),
            "timeout": 30,
        }
        # A partition from the database ends a connection in seconds, not at the kernel's two-hour
        # keepalive: a worker that cannot renew its leases learns so while they still hold.
        for option, value in (
            ("connect_timeout", 5),
            ("keepalives", 1),
            ("keepalives_idle", 5),
            ("keepalives_interval", 2),
            ("keepalives_count", 3),
        ):
            DATABASES["default"]["OPTIONS"].setdefault(option, value)
else:
    DATABASES = {
        "default": {
            "ENGINE": "aiconsole.sqlite",  # Django's SQLite, its connections reused (aiconsole/sqlite)
            "NAME": DATA_DIR / "aiconsole.sqlite3",
            # WAL lets the executor's threads write while pages read; IMMEDIATE avoids
            # lock-upgrade deadlocks between concurrent writers.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            "TEST": {"NAME": str(DATA_DIR / "test.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels and Celery -----------------------------------------------------------------------

REDIS_URL = env_str("AICONSOLE_REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The executor: "inprocess" runs replicas in the console's own process tree (embedded mode).
EXECUTOR = env_str("AICONSOLE_EXECUTOR", "celery" if REDIS_URL else "inprocess")
if EXECUTOR not in {"inprocess", "celery"}:
    raise ImproperlyConfigured(f"AICONSOLE_EXECUTOR must be inprocess or celery, got {EXECUTOR!r}")
CELERY_BROKER_URL = REDIS_URL

# How many replica processes this machine runs at once; the rest of the jobs wait QUEUED.
MAX_REPLICAS = env_int("AICONSOLE_MAX_REPLICAS", max(4, (os.cpu_count() or 2) * 2), minimum=1)
# Most replicas one role of a job may ask for (workerCount, parameterServerCount, evaluatorCount):
# larger counts are refused at submit, before they can exhaust the console.
MAX_REPLICA_COUNT = env_int("AICONSOLE_MAX_REPLICA_COUNT", 100, minimum=1)
# Bounds on walking a local folder a user names (batch inputs, model folders): links are never
# followed, and a walk past these many entries or seconds fails with a message that says so.
WALK_MAX_ENTRIES = env_int("AICONSOLE_WALK_MAX_ENTRIES", 100_000, minimum=1)
WALK_MAX_SECONDS = env_float("AICONSOLE_WALK_MAX_SECONDS", 30.0)
# The data analysis page: the first this many columns and rows of a file are analysed (the page
# says when a file has more), in at most ANALYSIS_WORKERS low-priority child processes at once, each
# stopped after ANALYSIS_SECONDS. A request waits ANALYSIS_WAIT_SECONDS at most, then the page polls.
# Results are kept per file version (path, size, mtime) in an in-memory LRU of this many entries.
ANALYSIS_MAX_COLUMNS = env_int("AICONSOLE_ANALYSIS_MAX_COLUMNS", 200, minimum=2)
ANALYSIS_MAX_ROWS = env_int("AICONSOLE_ANALYSIS_MAX_ROWS", 10_000, minimum=1)
ANALYSIS_SECONDS = env_float("AICONSOLE_ANALYSIS_SECONDS", 60.0)
# Half the CPUs: two analyses on a 2-CPU machine took both, and other users waited 4 times longer.
ANALYSIS_WORKERS = env_int("AICONSOLE_ANALYSIS_WORKERS", max(1, (os.cpu_count() or 2) // 2), minimum=1)
ANALYSIS_WAIT_SECONDS = env_float("AICONSOLE_ANALYSIS_WAIT_SECONDS", 2.0)
ANALYSIS_CACHE_ENTRIES = env_int("AICONSOLE_ANALYSIS_CACHE_ENTRIES", 32, minimum=1)
# A finished study's charts are kept once built (jobs/tuning/kept.py), per process, up to this many
# MB of their HTML (a 2,000-trial study's take ~3 MB); 0 keeps none.
STUDY_CHARTS_CACHE_MB = env_int("AICONSOLE_STUDY_CHARTS_CACHE_MB", 64, minimum=0)
# SIGTERM → SIGKILL grace when stopping a replica's process group.
STOP_GRACE_SECONDS = env_float("AICONSOLE_STOP_GRACE_SECONDS", 10.0)
# Each step of building a job's packages as its project's account (jobs/executor/builds.py).
BUILD_MAX_SECONDS = env_float("AICONSOLE_BUILD_MAX_SECONDS", 1800.0)
# TensorBoard for a job (jobs/tensorboard): started on first use, stopped after IDLE_SECONDS without
# a request, at most MAX at once per console process; START_SECONDS for one to start listening.
TENSORBOARD_IDLE_SECONDS = env_float("AICONSOLE_TENSORBOARD_IDLE_SECONDS", 600.0)
TENSORBOARD_MAX = env_int("AICONSOLE_TENSORBOARD_MAX", 4, minimum=1)
TENSORBOARD_START_SECONDS = env_float("AICONSOLE_TENSORBOARD_START_SECONDS", 60.0)
# Longest stored log line; longer ones are cut with a marker.
LOG_LINE_MAX_BYTES = env_int("AICONSOLE_LOG_LINE_MAX_BYTES", 32 * 1024, minimum=256)
# Most metric points one job stores (a tuning job's trials together); its log says when it has
# more (jobs/metrics/points.py). The job page draws every point it stores, so this bounds that page too.
METRIC_POINTS_MAX = env_int("AICONSOLE_METRIC_POINTS_MAX", 100_000, minimum=1)
# How often a running replica's CPU, memory, network and GPUs are sampled into its job's metrics
# (jobs/metrics/system.py); 0 samples nothing.
SYSTEM_METRICS_SECONDS = env_float("AICONSOLE_SYSTEM_METRICS_SECONDS", 5.0)
if SYSTEM_METRICS_SECONDS < 0:
    raise ImproperlyConfigured("AICONSOLE_SYSTEM_METRICS_SECONDS must be 0 (off) or more")
# Most points of its replicas' sampled use one job stores (a study's trials together), apart from
# METRIC_POINTS_MAX: 200,000 is about 7 hours of 8 replicas' 5 readings every 5 s.
SYSTEM_METRIC_POINTS_MAX = env_int("AICONSOLE_SYSTEM_METRIC_POINTS_MAX", 200_000, minimum=1)
# A client that takes longer than this to send a request's head, stops sending its body or reading
# an answer for this long is disconnected (console/cli/server.py): slow clients cannot hold every
# connection the console can accept.
CLIENT_TIMEOUT_SECONDS = env_float("AICONSOLE_CLIENT_TIMEOUT_SECONDS", 20.0)
# An open live-log WebSocket asks again this often whether its viewer may still watch: a signed-out
# or deactivated user, a changed password or a removed role closes it (jobs/logs/consumers.py).
STREAM_RECHECK_SECONDS = env_float("AICONSOLE_STREAM_RECHECK_SECONDS", 10.0)
if STREAM_RECHECK_SECONDS <= 0:
    raise ImproperlyConfigured(f"AICONSOLE_STREAM_RECHECK_SECONDS must be more than 0, got {STREAM_RECHECK_SECONDS}")
# Environment variables a trainer inherits from the console's environment (never secrets).
TRAINER_ENV_PASSTHROUGH = env_list(
    "AICONSOLE_TRAINER_ENV_PASSTHROUGH",
    ["HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "STORAGE_EMULATOR_HOST"],
)
# The project billed for Cloud Storage (with STORAGE_EMULATOR_HOST, the emulator's: "aiconsole").
GCS_PROJECT = env_str("AICONSOLE_GCS_PROJECT", "") or ""
# The first start's admin account and project (aiconsole.bootstrap); the admin's password is a
# secret, read through aiconsole.secret_env (AICONSOLE_ADMIN_PASSWORD).
ADMIN_USER = env_str("AICONSOLE_ADMIN_USER", "admin") or "admin"
DEFAULT_PROJECT = env_str("AICONSOLE_DEFAULT_PROJECT", "default-project") or "default-project"

# --- Models and serving (models_registry.conf names them) -----------------------------------

MODELS_DIR = DATA_DIR / "models"  # deployed versions' files
MODEL_IDLE_SECONDS = env_float("AICONSOLE_MODEL_IDLE_SECONDS", 180.0)
MODEL_MAX_NODES = env_int("AICONSOLE_MODEL_MAX_NODES", 4, minimum=1)
MODEL_MAX_REQUEST_BYTES = env_int("AICONSOLE_MODEL_MAX_REQUEST_BYTES", 1_572_864, minimum=1024)  # the original's
MODEL_PREDICT_TIMEOUT = env_float("AICONSOLE_MODEL_PREDICT_TIMEOUT", 60.0)
MODEL_LOAD_TIMEOUT = env_float("AICONSOLE_MODEL_LOAD_TIMEOUT", 300.0)
MODEL_MAX_FILES = env_int("AICONSOLE_MODEL_MAX_FILES", 1000, minimum=1)
MODEL_MAX_BYTES = env_int("AICONSOLE_MODEL_MAX_BYTES", 2 * 1024**3, minimum=1024)
BATCH_MAX_WORKERS = env_int("AICONSOLE_BATCH_MAX_WORKERS", 2, minimum=1)
MODEL_PREWARM = env_bool("AICONSOLE_MODEL_PREWARM", True)

# Whom trainers, TensorBoards and serving processes run as when the console runs as root
# (aiconsole.trainer_user): unset, an account of their project's own, with a user and group id
# from AICONSOLE_TRAINER_UIDS, created on first use; "root" runs them as root. A console that is
# not root runs them as its own user. ("aiconsole-trainer", the one shared account of earlier
# versions, means the same as unset.)
TRAINER_USER = env_str("AICONSOLE_TRAINER_USER", "") or ""
if TRAINER_USER not in ("", "root", "aiconsole-trainer"):
    raise ImproperlyConfigured(
        f"AICONSOLE_TRAINER_USER={TRAINER_USER}: trainers run as an account of their own project (ids from "
        "AICONSOLE_TRAINER_UIDS), so one named account is no longer used; unset it, or set it to root to run "
        "them as root."
    )


def _id_range(name: str, default: str) -> range:
    text = env_str(name, default) or default
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not match or not 1000 <= int(match[1]) < int(match[2]) < 2**31 - 1:
        raise ImproperlyConfigured(
            f"{name} must be a range of user ids FIRST-LAST with 1000 <= FIRST < LAST "
            f"< 2147483647, for example {default}; got {text!r}"
        )
    return range(int(match[1]), int(match[2]) + 1)


# The user and group ids the projects' accounts get, one each, the same on every worker host.
TRAINER_UIDS = _id_range("AICONSOLE_TRAINER_UIDS", "70000-79999")
# Interpreters for runtime versions, "3.7=/usr/bin/python3.7,3.8=/opt/py38/bin/python": looked
# up first, before uv's discovery and pyenv's versions (jobs.runtimes.pythons.find_python).
PYTHONS = env_str("AICONSOLE_PYTHONS", "") or ""
# The runtime's GPU-capable build for replicas with GPUs: "auto" (when this host has NVIDIA GPUs;
# scaled workers: when the replica was given devices), "always" or "never".
GPU_BUILD = env_str("AICONSOLE_GPU_BUILD", "auto")
if GPU_BUILD not in {"auto", "always", "never"}:
    raise ImproperlyConfigured(f"AICONSOLE_GPU_BUILD must be auto, always or never, got {GPU_BUILD!r}")
# Custom containers (jobs/containers): the engine that runs them, "auto" (podman, else docker),
# "podman", "docker", a path to either, or "none" (container jobs are refused at submit).
CONTAINER_ENGINE = env_str("AICONSOLE_CONTAINER_ENGINE", "auto") or "auto"
# A container job's pod network: "bridge" (its own namespace with outbound access, as the original's
# VMs had, on a bridge of its project's own that other projects' containers cannot reach; never the
# host's loopback) or "none" (only the pod's own loopback).
CONTAINER_NETWORK = env_str("AICONSOLE_CONTAINER_NETWORK", "bridge") or "bridge"
if CONTAINER_NETWORK not in {"bridge", "none"}:
    raise ImproperlyConfigured(f"AICONSOLE_CONTAINER_NETWORK must be bridge or none, got {CONTAINER_NETWORK!r}")
# Whether containers may create user namespaces ("deny": refused by a seccomp profile; "allow").
CONTAINER_USER_NAMESPACES = env_str("AICONSOLE_CONTAINER_USER_NAMESPACES", "deny") or "deny"
if CONTAINER_USER_NAMESPACES not in {"deny", "allow"}:
    raise ImproperlyConfigured(
        f"AICONSOLE_CONTAINER_USER_NAMESPACES must be deny or allow, got {CONTAINER_USER_NAMESPACES!r}"
    )
# A container replica that asks for GPUs on a host that cannot give containers any: "warn" runs it
# without one and says so on the job; "refuse" refuses the job at submit.
CONTAINER_GPU_MISSING = env_str("AICONSOLE_CONTAINER_GPU_MISSING", "warn") or "warn"
if CONTAINER_GPU_MISSING not in {"warn", "refuse"}:
    raise ImproperlyConfigured(f"AICONSOLE_CONTAINER_GPU_MISSING must be warn or refuse, got {CONTAINER_GPU_MISSING!r}")
# Largest image archive one upload may be (docker save / podman save output, gzipped or not).
CONTAINER_IMAGE_MAX_BYTES = env_int("AICONSOLE_CONTAINER_IMAGE_MAX_BYTES", 20 * 1024**3, minimum=1024)
# The most a gzipped one may unpack to (and never past 20 times its own size, above 256 MiB).
CONTAINER_IMAGE_MAX_UNPACKED_BYTES = env_int("AICONSOLE_CONTAINER_IMAGE_MAX_UNPACKED_BYTES", 40 * 1024**3, minimum=1024)
# Google's pre-built training images are built here when a job names one (jobs/runtimes/prebuilt.toml):
# a TOML file of the site's own recipes, the Debian mirror mmdebstrap uses (its default when unset),
# and the longest one build may take.
PREBUILT_IMAGES = env_str("AICONSOLE_PREBUILT_IMAGES", "") or ""
PREBUILT_DEBIAN_MIRROR = env_str("AICONSOLE_PREBUILT_DEBIAN_MIRROR", "") or ""
PREBUILT_BUILD_MAX_SECONDS = env_float("AICONSOLE_PREBUILT_BUILD_MAX_SECONDS", 3600.0)
# Whether a missing interpreter may be downloaded with `uv python install` ("automatic"/"never").
PYTHON_DOWNLOADS = env_str("AICONSOLE_PYTHON_DOWNLOADS", "automatic")
if PYTHON_DOWNLOADS not in {"automatic", "never"}:
    raise ImproperlyConfigured(f"AICONSOLE_PYTHON_DOWNLOADS must be automatic or never, got {PYTHON_DOWNLOADS!r}")
# How often a job is restarted after the console itself went away while it ran, or (scaled
# mode) after one of its replicas was lost more than MAX_REPLICA_RESTARTS times: as the original.
MAX_JOB_RESTARTS = env_int("AICONSOLE_MAX_JOB_RESTARTS", 3, minimum=0)
MAX_REPLICA_RESTARTS = env_int("AICONSOLE_MAX_REPLICA_RESTARTS", 5, minimum=0)
# Scaled mode: workers renew their replicas' leases every heartbeat; a replica whose lease ran out
# (its worker was killed, frozen, cut off) starts again elsewhere, after it stopped itself at two
# thirds of the lease (jobs/cluster/agent.py).
WORKER_HEARTBEAT_SECONDS = env_float("AICONSOLE_WORKER_HEARTBEAT_SECONDS", 1.0)
WORKER_LEASE_SECONDS = env_float("AICONSOLE_WORKER_LEASE_SECONDS", 6.0)
if WORKER_LEASE_SECONDS < 2 * WORKER_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        "AICONSOLE_WORKER_LEASE_SECONDS must be at least twice AICONSOLE_WORKER_HEARTBEAT_SECONDS, "
        f"got {WORKER_LEASE_SECONDS:g} and {WORKER_HEARTBEAT_SECONDS:g}"
    )
# Scaled mode: how long the coordinator's lease lasts unrenewed: a coordinator that is frozen or
# cut off from the database is replaced this long after its last renewal (one that died, at once).
# Notifications (jobs/notifications): webhooks may reach public addresses only, unless these CIDR
# networks allow more (a private chat server, a test's loopback); e-mail goes through this server.
WEBHOOK_ALLOWED_NETWORKS = env_list("AICONSOLE_WEBHOOK_ALLOWED_NETWORKS", [])
# Web access (jobs.webaccess): the longest a job may hold a failed replica for its shell (its
# ``aiconsole-hold-failed-replica`` label, in minutes), and the most of one shell's recording kept.
WEB_ACCESS_HOLD_MAX_MINUTES = env_int("AICONSOLE_WEB_ACCESS_HOLD_MAX_MINUTES", 60, minimum=1)
WEB_ACCESS_RECORDING_MAX_BYTES = env_int("AICONSOLE_WEB_ACCESS_RECORDING_MAX_MB", 64, minimum=1) * 1024 * 1024
CONSOLE_URL = env_str("AICONSOLE_URL", "http://127.0.0.1:8000") or "http://127.0.0.1:8000"  # links in them
EMAIL_HOST = env_str("AICONSOLE_EMAIL_HOST", "localhost") or "localhost"
EMAIL_PORT = env_int("AICONSOLE_EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("AICONSOLE_EMAIL_USER", "") or ""
EMAIL_HOST_PASSWORD = env_str("AICONSOLE_EMAIL_PASSWORD", "") or ""
EMAIL_USE_TLS = env_bool("AICONSOLE_EMAIL_TLS", False)
DEFAULT_FROM_EMAIL = env_str("AICONSOLE_EMAIL_FROM", "aiconsole@localhost") or "aiconsole@localhost"
EMAIL_TIMEOUT = 10

# Vertex AI over gRPC (console/grpc_front.py), beside the web port: "off" serves REST only.
GRPC_PORT = env_str("AICONSOLE_GRPC_PORT", "8443") or "8443"
if GRPC_PORT != "off" and not GRPC_PORT.isdigit():
    raise ImproperlyConfigured(f"AICONSOLE_GRPC_PORT must be a port number or off, got {GRPC_PORT!r}")
GRPC_NAMES = env_list("AICONSOLE_GRPC_NAMES", [])  # more names for its certificate than this machine's
COORDINATOR_LEASE_SECONDS = env_float("AICONSOLE_COORDINATOR_LEASE_SECONDS", 5.0)
if COORDINATOR_LEASE_SECONDS < 2:
    raise ImproperlyConfigured(
        f"AICONSOLE_COORDINATOR_LEASE_SECONDS must be at least 2, got {COORDINATOR_LEASE_SECONDS:g}"
    )
# How long a worker has to pick up a replica handed to it before it is handed to another.
WORKER_CLAIM_SECONDS = env_float("AICONSOLE_WORKER_CLAIM_SECONDS", 10.0)

# --- Audit log -----------------------------------------------------------------------------------

# How long ``aiconsole audit purge`` keeps entries: Admin Activity at least 400 days, as the original.
AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS = env_int("AICONSOLE_AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS", 400, minimum=400)
AUDIT_DATA_ACCESS_RETENTION_DAYS = env_int("AICONSOLE_AUDIT_DATA_ACCESS_RETENTION_DAYS", 30, minimum=1)
# The jobs' environment layers (under ENV_DIR) unused this many days are removed by the daily
# clean-up (``aiconsole gc``); 0 keeps them. A project's own records follow its retention.
ENVIRONMENT_RETENTION_DAYS = env_int("AICONSOLE_ENVIRONMENT_RETENTION_DAYS", 0, minimum=0)
# A Google Cloud project: audit entries and job logs are also written to its Cloud Logging.
# Unset means nothing ever tries to reach Google.
CLOUD_LOGGING_PROJECT = env_str("AICONSOLE_CLOUD_LOGGING_PROJECT")

# --- Auth, static, i18n ------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Sign-in throttling (django-axes, aiconsole/signin.py): after AICONSOLE_LOGIN_FAILURE_LIMIT wrong
# passwords for one user from one address, that user is refused from that address for the cool-off
# (429); after AICONSOLE_LOGIN_ACCOUNT_FAILURE_LIMIT for one user from any addresses, everywhere.
# Failures for other names never refuse a user. Failures and lockouts are audited. Bearer tokens
# and existing sessions are not affected.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AICONSOLE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_ACCOUNT_FAILURE_LIMIT = env_int("AICONSOLE_LOGIN_ACCOUNT_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AICONSOLE_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
# The user and address together, and the user alone (each with its own limit: SignInHandler);
# never the address alone, which would lock out everyone behind one proxy or NAT.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "username"]
AXES_HANDLER = "aiconsole.signin.SignInHandler"
# Retrying during a lockout neither prolongs it nor counts: the cool-off is what the page says.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "aiconsole.signin.lockout_response"
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only the console's own assets: every page's are in static/. The apps' folders held DRF's
# browsable-API and django-htmx's debug assets, which nothing links (the API renders JSON only),
# and WhiteNoise indexed their 66 files in every process that loads the middleware.
STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
STATIC_ROOT = DATA_DIR / datadir.STATIC_FOLDER
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Uploads: trainer packages can be large; Django streams anything over this to disk.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
MAX_PACKAGE_BYTES = env_int("AICONSOLE_MAX_PACKAGE_BYTES", 512 * 1024 * 1024, minimum=1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "aiconsole.tokens.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["aiconsole.parsers.JSONParser"],  # bounded nesting
    "EXCEPTION_HANDLER": "aiconsole.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # The v1 API picks JSON with ?alt=json, never with DRF's ?format=: an unknown format must not
    # turn into an HTML 404 (the fuzzer found ?format=null did).
    "URL_FORMAT_OVERRIDE": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "aiconsole": {"handlers": ["console"], "level": env_str("AICONSOLE_LOG_LEVEL", "INFO")},
        "jobs": {"handlers": ["console"], "level": env_str("AICONSOLE_LOG_LEVEL", "INFO")},
        "models_registry": {"handlers": ["console"], "level": env_str("AICONSOLE_LOG_LEVEL", "INFO")},
        # Server errors (500s) with their tracebacks.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}
