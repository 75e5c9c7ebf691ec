"""Scaled mode: ``aiconsole web``, ``aiconsole worker`` and ``aiconsole workers``.

They need ``AICONSOLE_DATABASE_URL`` (PostgreSQL) and ``AICONSOLE_REDIS_URL``: every process on
every host shares that database and that Redis. See the README's "Scaled mode" section.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from console.cli.server import announce_trainer_user, migrate, setup_django


def _require_scaled() -> str | None:
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return "scaled mode needs PostgreSQL: set AICONSOLE_DATABASE_URL=postgres://USER@HOST:5432/NAME"
    if not settings.REDIS_URL:
        return "scaled mode needs Redis: set AICONSOLE_REDIS_URL=redis://HOST:6379/0"
    if settings.EXECUTOR != "celery":
        return "AICONSOLE_EXECUTOR=inprocess runs jobs inside 'aiconsole up'; scaled mode needs celery"
    return None


def cmd_web(args) -> int:
    setup_django(getattr(args, "data_dir", None))
    problem = _require_scaled()
    if problem:
        print(f"aiconsole web: {problem}", file=sys.stderr)
        return 2
    migrate()
    # deferred: Django is configured by setup_django() first; the client commands never load it
    import console.celery  # noqa: F401  the coordinator here sends scaled mode's tasks through its app
    from aiconsole.bootstrap import ensure_admin_and_project
    from console.cli.server import grpc_process, serve_web
    from jobs.cluster import coordinator

    result = ensure_admin_and_project()
    if result.password:
        print(f"Created the admin account. Username: {result.username}  Password: {result.password}")
    print(f"AI Console (scaled mode) is serving http://{args.host}:{args.port}/", flush=True)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs import kinds

    coordinator.start("web")
    kinds.start_services()  # online prediction is served by the web process, as in embedded mode
    vertex_grpc = grpc_process(args.host, args.port)  # Vertex AI over gRPC, in a process of its own
    if vertex_grpc is not None:
        vertex_grpc.start()
    try:
        return serve_web(args.host, args.port)
    finally:
        if vertex_grpc is not None:
            vertex_grpc.stop()
        kinds.stop_services()
        coordinator.stop()


def cmd_worker(args) -> int:
    setup_django(getattr(args, "data_dir", None))
    problem = _require_scaled()
    if problem:
        print(f"aiconsole worker: {problem}", file=sys.stderr)
        return 2
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs import catalogue
    from jobs.cluster import placement

    if args.region not in catalogue.REGIONS:
        print(
            f"aiconsole worker: --region: unknown region {args.region!r}; known: "
            f"{', '.join(sorted(catalogue.REGIONS))}.",
            file=sys.stderr,
        )
        return 2
    try:
        accelerators = placement.parse_accelerators(args.accelerators or "")
        cpus, memory = placement.parse_capacity(
            args.capacity or "", default_cpus=float(os.cpu_count() or 1), default_memory_gb=_memory_gb()
        )
        machine_types = placement.parse_machine_types(args.machine_types or "")
        ports = _ports(args.ports)
    except ValueError as error:
        print(f"aiconsole worker: {error}", file=sys.stderr)
        return 2
    migrate()
    if not announce_trainer_user("aiconsole worker"):
        return 2
    from django.conf import settings

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from console.celery import app as celery_app  # the worker runs scaled mode's tasks, and sends them
    from jobs.cluster import agent, coordinator

    # Without --capacity the worker runs every tier's jobs, as embedded mode does: a 2-core host
    # must still run a BASIC job, whose machine type ("standard") stands for 4 CPUs and 15 GB.
    slots = 0 if args.capacity else settings.MAX_REPLICAS
    if slots:
        print(
            f"No --capacity: this worker treats machine types as labels and runs at most {slots} replicas at "
            "once (AICONSOLE_MAX_REPLICAS; a larger job runs alone), like embedded mode; give --capacity "
            "cpus=N,memory=GB for strict accounting.",
            flush=True,
        )
    worker_agent = agent.register(
        region=args.region,
        machine_types=machine_types,
        accelerators=accelerators,
        cpus=cpus,
        memory_gb=memory,
        address=args.address,
        ports=ports,
        slots=slots,
    )
    worker = worker_agent.worker
    print(
        f"Worker {worker.name} in {worker.region}: {placement.capacity_text(cpus, memory, slots)}"
        + "".join(f", {n} x {a}" for a, n in accelerators.items())
        + f"; replicas reachable at {worker.address}:{ports[0]}-{ports[1]}.",
        flush=True,
    )
    useless = placement.holds_nothing(cpus, memory, machine_types, slots)
    if useless:
        print(f"Warning: {useless}", file=sys.stderr, flush=True)
    if os.geteuid() == 0:
        # Celery warns about any worker run as root; here root is needed (each project's trainers
        # run as its own account, containers run through the engine), and the worker takes JSON
        # messages only, so a message on Redis can never run code: say that instead.
        import warnings

        from celery.exceptions import SecurityWarning

        warnings.filterwarnings("ignore", category=SecurityWarning)
        print(
            "This worker runs as root, as it must to run each project's trainers as that project's own "
            "account; it accepts JSON messages only (never pickle), so nothing sent through Redis runs as root.",
            flush=True,
        )
    coordinator.start("worker")
    celery_worker = celery_app.Worker(
        queues=[worker.queue],
        pool="threads",
        concurrency=args.concurrency,
        hostname=f"{worker.name}@%h",
        loglevel=os.environ.get("AICONSOLE_WORKER_LOG_LEVEL", "WARNING"),
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        quiet=True,
    )
    stopping = threading.Event()

    def leave(signum, frame):
        if not stopping.is_set():
            stopping.set()
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, leave)
    try:
        celery_worker.start()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        print(f"Worker {worker.name} is leaving: its replicas start again elsewhere.", flush=True)
        coordinator.stop()
        worker_agent.stop()
    return 0


def cmd_workers(args) -> int:
    setup_django(getattr(args, "data_dir", None))
    from django.utils import timezone

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs.cluster.capacity import coordinator, hidden_workers, summaries

    rows = [("NAME", "REGION", "STATE", "CAPACITY", "RUNNING", "LAST_HEARTBEAT")]
    now = timezone.now()
    summaries_rows = summaries(include_gone=args.all)
    for row in summaries_rows:
        worker = row["worker"]
        running = [f"{r.job.job_id}/{r.label}" for r in row["replicas"]] + [j.job_id for j in row["jobs"]]
        cap = row["capacity"] + "".join(f", {n} x {a}" for a, n in (worker.accelerators or {}).items())
        rows.append(
            (
                worker.name,
                worker.region,
                row["state"],
                cap,
                " ".join(running) or "-",
                f"{(now - worker.heartbeat).total_seconds():.0f}s ago",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for row in summaries_rows:
        if row["holds_nothing"]:
            print(f"{row['worker'].name}: {row['holds_nothing']}")
    hidden = 0 if args.all else hidden_workers()
    if hidden:
        print(f"{hidden} stopped or lost worker{'s' if hidden != 1 else ''} not shown (--all shows them).")
    leader = coordinator()
    if leader is None:
        print("Coordinator: none yet (a web or worker process leads once it starts).")
    else:
        state = "" if leader["holds"] else "; its lease ran out, another process takes over"
        print(f"Coordinator: {leader['name']} (epoch {leader['epoch']}{state}).")
    return 0


def _memory_gb() -> float:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 4.0


def _ports(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        raise ValueError(f"--ports: expected a range such as 20000-29999, got {text!r}.") from None
    if not 1024 <= low <= high <= 65535:
        raise ValueError(f"--ports: {text} is not a range of ports between 1024 and 65535.")
    return low, high


def register(commands) -> None:
    web = commands.add_parser("web", help="scaled mode: serve the console (jobs run on 'aiconsole worker's)")
    web.add_argument("--host", default="127.0.0.1")
    web.add_argument("--port", type=int, default=8000)
    web.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    web.set_defaults(func=cmd_web)

    worker = commands.add_parser("worker", help="scaled mode: run replicas on this host")
    worker.add_argument("--region", required=True, help="the region whose jobs this worker takes, e.g. us-central1")
    worker.add_argument(
        "--machine-types", dest="machine_types", help="comma-separated machine types it takes (default: all)"
    )
    worker.add_argument("--accelerators", help="its GPUs or TPUs, e.g. nvidia-tesla-t4=2")
    worker.add_argument(
        "--capacity",
        help="what it offers, e.g. cpus=16,memory=64 (GB), counted strictly; "
        "default: machine types are labels and it runs AICONSOLE_MAX_REPLICAS replicas at once",
    )
    worker.add_argument("--address", help="the address other hosts reach its replicas at (default: detected)")
    worker.add_argument("--ports", default="20000-29999", help="ports its replicas listen on (TF_CONFIG)")
    worker.add_argument("--concurrency", type=int, default=8, help="replicas it prepares at once")
    worker.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    worker.set_defaults(func=cmd_worker)

    workers = commands.add_parser("workers", help="scaled mode: list workers and what runs on them")
    workers.add_argument("--all", action="store_true", help="also workers that stopped or were lost")
    workers.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    workers.set_defaults(func=cmd_workers)
