"""``aiconsole notifications list|create|describe|delete``: a project's notification rules, over the
REST API (``/v1/projects/P/notificationRules``). Only a project's admins may see or change them."""

from __future__ import annotations

from console.cli import common, output
from console.cli.client import CliError


@common.command("notifications.list")
def cmd_list(args) -> int:
    client = common.client(args)
    found = client.get(client.project_path("notificationRules")).get("notificationRules") or []
    if not found and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [
        [
            rule["name"].rsplit("/", 1)[1],
            rule.get("displayName") or "-",
            ",".join(rule["events"]),
            (rule.get("webhook") or {}).get("uri") or ",".join((rule.get("email") or {}).get("addresses", [])),
        ]
        for rule in found
    ]
    output.emit_list(found, args.format, output.table(["RULE_ID", "DISPLAY_NAME", "EVENTS", "TELLS"], rows))
    return 0


@common.command("notifications.create")
def cmd_create(args) -> int:
    client = common.client(args)
    if not args.webhook and not args.email:
        raise CliError("give --webhook URL or --email ADDRESS (or both): a rule must tell someone", exit_code=2)
    body: dict = {"events": [e.strip().upper() for e in args.events.split(",") if e.strip()]}
    if args.display_name:
        body["displayName"] = args.display_name
    if args.webhook:
        body["webhook"] = {"uri": args.webhook, "format": "slack" if args.slack else "json"}
    if args.email:
        body["email"] = {"addresses": args.email}
    if args.waiting_minutes is not None:
        body["waitingMinutes"] = args.waiting_minutes
    rule = client.call("POST", client.project_path("notificationRules"), body=body)
    output.status(f"Created notification rule [{rule['name'].rsplit('/', 1)[1]}].")
    if rule.get("secret"):
        output.status(f"Its signing secret (shown this once; each webhook body is signed with it): {rule['secret']}")
    if args.format:
        output.emit(rule, args.format)
    return 0


@common.command("notifications.describe")
def cmd_describe(args) -> int:
    client = common.client(args)
    rule = client.get(client.project_path("notificationRules") + f"/{args.rule}")
    output.emit(rule, args.format or output.parse_format("yaml"))
    return 0


@common.command("notifications.delete")
def cmd_delete(args) -> int:
    client = common.client(args)
    client.call("DELETE", client.project_path("notificationRules") + f"/{args.rule}")
    output.status(f"Deleted notification rule [{args.rule}].")
    return 0


def register(commands) -> None:
    group = common.add_group(
        commands, "notifications", "word when jobs end, wait, or a study improves: list, create, describe, delete"
    )
    listing = group.add_parser("list", help="list the project's notification rules")
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_list)

    create = group.add_parser("create", help="a rule: these events, told to a webhook and/or e-mail addresses")
    create.add_argument(
        "--events",
        required=True,
        help="comma-separated: JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED, JOB_WAITING, STUDY_BEST_IMPROVED",
    )
    create.add_argument("--webhook", metavar="URL", help="POST each notification here (JSON, signed)")
    create.add_argument("--slack", action="store_true", help='send a Slack-compatible {"text": …} body instead')
    create.add_argument("--email", metavar="ADDRESS", action="append", help="e-mail this address (repeat for more)")
    create.add_argument("--waiting-minutes", type=int, help="JOB_WAITING: after this long in the queue (default 30)")
    create.add_argument("--display-name", help="a name for the rule")
    common.connection_flags(create)
    create.set_defaults(func=cmd_create)

    describe = group.add_parser("describe", help="a rule and its last deliveries, each attempt's outcome")
    describe.add_argument("rule", metavar="RULE_ID")
    common.connection_flags(describe)
    describe.set_defaults(func=cmd_describe)

    delete = group.add_parser("delete", help="delete a rule")
    delete.add_argument("rule", metavar="RULE_ID")
    common.connection_flags(delete, formats=False)
    delete.set_defaults(func=cmd_delete)
