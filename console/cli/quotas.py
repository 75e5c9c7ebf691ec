"""``aiconsole quotas describe|set``: a project's quotas (concurrent CPUs, replicas and accelerators
per type, per region or in all) and its weight in the fair queue, over the REST API
(``/v1/projects/P/quotas``). Anyone in the project reads them; platform admins set them."""

from __future__ import annotations

from console.cli import common, output
from console.cli.client import CliError


@common.command("quotas.describe")
def cmd_describe(args) -> int:
    client = common.client(args)
    found = client.get(client.project_path("quotas"))
    rows = [
        [q["metric"], q.get("region") or "all", str(q["limit"]), str(q.get("held", 0))] for q in found.get("limits", [])
    ]
    text = output.table(["METRIC", "REGION", "LIMIT", "HELD"], rows) if rows else "No quotas: only the machine limits."
    text += f"\nweight in the fair queue: {found.get('weight', 1):g}\n"
    output.emit(found, args.format, text)
    return 0


@common.command("quotas.set")
def cmd_set(args) -> int:
    client = common.client(args)
    body: dict = {}
    if args.metric:
        if args.limit is None and not args.remove:
            raise CliError("give --limit N, or --remove to lift the quota", exit_code=2)
        body["limits"] = [
            {"metric": args.metric.upper(), "region": args.region or "", "limit": None if args.remove else args.limit}
        ]
    if args.weight is not None:
        body["weight"] = args.weight
    if not body:
        raise CliError("give --metric with --limit (or --remove), and/or --weight", exit_code=2)
    found = client.call("PATCH", client.project_path("quotas"), body=body)
    output.status(f"Updated the quotas of [{client.project}].")
    if args.format:
        output.emit(found, args.format)
    return 0


def register(commands) -> None:
    group = common.add_group(commands, "quotas", "a project's quotas and fair-queue weight: describe, set")
    describe = group.add_parser("describe", help="the project's limits, what its running jobs hold, its weight")
    common.connection_flags(describe)
    describe.set_defaults(func=cmd_describe)

    change = group.add_parser("set", help="set or lift one limit, or the weight (platform admins)")
    change.add_argument("--metric", help="CPUS, REPLICAS or an accelerator type such as NVIDIA_TESLA_T4")
    change.add_argument("--limit", type=int, help="how many the project's running jobs may hold at once")
    change.add_argument("--region", help="the region it applies in (default: all regions)")
    change.add_argument("--remove", action="store_true", help="lift the limit instead")
    change.add_argument("--weight", type=float, help="the project's weight in the fair queue (default 1)")
    common.connection_flags(change)
    change.set_defaults(func=cmd_set)
