"""Administration commands that run on the server's own machine.

``projects create|add-iam-policy-binding|remove-iam-policy-binding``,
``users create|list|set-password|deactivate|reactivate``, ``audit verify|purge`` and ``gc`` work on the
data dir directly (like ``token create``), through the same
services as the console. They act as the ``system`` principal: whoever can run them already holds
the data dir. Their audit entries carry the user agent ``aiconsole-cli``.
"""

from __future__ import annotations

import argparse
import functools
import secrets
import sys
import uuid

from console.cli.server import migrate, setup_django

USER_AGENT = "aiconsole-cli"


def _start(args) -> None:
    setup_django(getattr(args, "data_dir", None))
    migrate()


def _as_cli_call(func):
    """Each command is one "request" in the audit log: its own id, the CLI's user agent."""

    @functools.wraps(func)
    def run(args) -> int:
        # deferred: the request context is Django's middleware; 'aiconsole jobs ...' and the other
        # client commands build this parser too and never load Django
        from aiconsole.middleware import RequestContext, current_request

        token = current_request.set(RequestContext(request_id=uuid.uuid4().hex, user_agent=USER_AGENT))
        try:
            return func(args)
        finally:
            current_request.reset(token)

    return run


def _fail(message: str, code: int = 1) -> int:
    print(f"ERROR: {message}", file=sys.stderr)
    return code


def _refused(error) -> int:
    """A ServiceError in words, without the API's ``Field: … Error:`` framing."""
    if error.violations:
        return _fail(" ".join(v.description for v in error.violations))
    return _fail(error.message)


def _project(project_id: str):
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole.models import Project

    return Project.objects.filter(project_id=project_id).first()


def _print_policy(policy: dict) -> None:
    import yaml

    print(yaml.safe_dump(policy or {}, sort_keys=True, default_flow_style=False), end="")


# --- projects -------------------------------------------------------------------------------------


@_as_cli_call
def cmd_projects_create(args) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import accounts, iam
    from aiconsole.errors import ServiceError

    try:
        project = accounts.create_project(args.project_id, actor=iam.SYSTEM, display_name=args.display_name or "")
    except ServiceError as error:
        return _refused(error)
    print(f"Created project [{project.project_id}] (number {project.project_number}).")
    print(
        f"Give it an admin: aiconsole projects add-iam-policy-binding {project.project_id} "
        "--member=user:NAME --role=roles/ml.admin"
    )
    return 0


def _change_binding(args, *, add: bool) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import iam, policies
    from aiconsole.errors import ServiceError

    project = _project(args.project)
    if project is None:
        return _fail(f"Project [{args.project}] not found.")
    try:
        if add:
            policies.add_member(project, args.member, args.role, actor=iam.SYSTEM)
        else:
            policies.remove_binding(project, args.member, args.role, actor=iam.SYSTEM)
    except ServiceError as error:
        return _refused(error)
    print(f"Updated IAM policy for project [{project.project_id}].")
    _print_policy(policies.policy_of(project))
    return 0


@_as_cli_call
def cmd_add_binding(args) -> int:
    return _change_binding(args, add=True)


@_as_cli_call
def cmd_remove_binding(args) -> int:
    return _change_binding(args, add=False)


# --- users ----------------------------------------------------------------------------------------


def _stdin_password(args) -> str | None:
    """With ``--password-stdin`` its first line ("" when there is none); otherwise None."""
    return sys.stdin.readline().rstrip("\r\n") if args.password_stdin else None


@_as_cli_call
def cmd_users_create(args) -> int:
    password = _stdin_password(args)
    if password == "":
        return _fail("--password-stdin: no password on standard input.", 2)
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import accounts, iam
    from aiconsole.errors import ServiceError

    try:
        user, password = accounts.create_user(
            args.username, actor=iam.SYSTEM, email=args.email or "", password=password
        )
    except ServiceError as error:
        return _refused(error)
    print(f"Created user [{user.get_username()}].")
    if not args.password_stdin:
        print(f"Password: {password}")
        print("This password is shown once.")
    return 0


def _user(username: str):
    from django.contrib.auth import get_user_model  # Django is set up by now (_start)

    return get_user_model().objects.filter(username=username).first()


@_as_cli_call
def cmd_users_list(args) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import accounts, iam

    print(f"{'USERNAME':<24} {'EMAIL':<32} {'PLATFORM ADMIN':<15} ACTIVE")
    for user in accounts.list_users(actor=iam.SYSTEM):
        print(
            f"{user.get_username():<24} {user.email or '-':<32} {'yes' if user.is_superuser else 'no':<15} "
            f"{'yes' if user.is_active else 'no'}"
        )
    return 0


@_as_cli_call
def cmd_users_set_password(args) -> int:
    """For a user locked out (the only admin included): a new password, their sessions ended."""
    password = _stdin_password(args)
    if password == "":
        return _fail("--password-stdin: no password on standard input.", 2)
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import accounts, iam
    from aiconsole.errors import ServiceError

    user = _user(args.username)
    if user is None:
        return _fail(f"No user named {args.username!r}.", 2)
    chosen = password or secrets.token_urlsafe(12)
    try:
        accounts.set_password(user, chosen, actor=iam.SYSTEM)
    except ServiceError as error:
        return _refused(error)
    print(f"Set a new password for [{user.get_username()}]; their sessions were signed out.")
    if password is None:
        print(f"Password: {chosen}")
        print("This password is shown once.")
    if not user.is_active:
        print(
            f"[{user.get_username()}] is deactivated: 'aiconsole users reactivate {user.get_username()}' "
            "lets them sign in."
        )
    return 0


def _activation(active: bool):
    @_as_cli_call
    def run(args) -> int:
        _start(args)
        # deferred: Django is configured by setup_django() first; the client commands never load it
        from aiconsole import accounts, iam
        from aiconsole.errors import ServiceError

        user = _user(args.username)
        if user is None:
            return _fail(f"No user named {args.username!r}.", 2)
        try:
            (accounts.reactivate_user if active else accounts.deactivate_user)(user, actor=iam.SYSTEM)
        except ServiceError as error:
            return _refused(error)
        if active:
            print(f"Reactivated [{user.get_username()}]: they can sign in again (their old API tokens stay revoked).")
        else:
            print(f"Deactivated [{user.get_username()}]: their sessions ended and their API tokens were revoked.")
        return 0

    return run


cmd_users_deactivate = _activation(False)
cmd_users_reactivate = _activation(True)


# --- audit ----------------------------------------------------------------------------------------


@_as_cli_call
def cmd_audit_verify(args) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import audit

    breaks = audit.verify_chain()
    if breaks:
        for found in breaks:
            label = "MALFORMED" if found.kind == "malformed" else "TAMPERED"
            print(f"{label}: {found}", file=sys.stderr)
        return 1
    counts = audit.chain_lengths()
    print(
        f"Audit log intact: {counts['activity']} Admin Activity and {counts['data_access']} Data Access "
        "entries verified."
    )
    return 0


@_as_cli_call
def cmd_audit_purge(args) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import audit

    try:
        removed = audit.purge(dry_run=args.dry_run)
    except audit.ChainBroken as error:
        return _fail(f"{error} Run 'aiconsole audit verify' and investigate first.")
    verb = "Would remove" if args.dry_run else "Removed"
    for log_type, count in removed.items():
        label = audit.LogType(log_type).label
        print(f"{verb} {count} {label} entries older than {audit.retention_days(log_type)} days.")
    return 0


# --- clean-up -------------------------------------------------------------------------------------


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""


@_as_cli_call
def cmd_gc(args) -> int:
    _start(args)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import iam
    from aiconsole.errors import ServiceError
    from jobs.executor import cleanup
    from jobs.usage import services

    project = None
    if args.project:
        project = _project(args.project)
        if project is None:
            return _fail(f"No project {args.project}.")
    if args.set_retention is not None:
        if project is None:
            return _fail("--set-retention needs --project.")
        try:
            services.set_retention(project, args.set_retention, args.protect_label or "", actor=iam.SYSTEM)
        except ServiceError as error:
            return _refused(error)
        print(f"{project.project_id} keeps its jobs' records {args.set_retention or 'for ever'} days after they end.")
        return 0
    items = cleanup.plan(project=project) if args.dry_run else cleanup.run(project=project)
    for item in items:
        rows = f" ({item.count} rows)" if item.count else ""
        print(f"{item.project or '-'}\t{item.kind}\t{item.target}{rows}\t{_size(item.bytes)}")
    verb = "Would free" if args.dry_run else "Freed"
    print(f"{verb} {_size(sum(item.bytes for item in items))} in {len(items)} items.")
    return 0


def register(commands) -> None:
    def data_dir(parser):
        parser.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
        return parser

    projects = commands.add_parser("projects", help="projects and their members (on the server)")
    project_commands = projects.add_subparsers(dest="projects_command", required=True)
    create = data_dir(project_commands.add_parser("create", help="create a project"))
    create.add_argument("project_id")
    create.add_argument("--display-name")
    create.set_defaults(func=cmd_projects_create)
    for verb, func, help_text in (
        ("add", cmd_add_binding, "grant a role on a project"),
        ("remove", cmd_remove_binding, "take a role away on a project"),
    ):
        binding = data_dir(project_commands.add_parser(f"{verb}-iam-policy-binding", help=help_text))
        binding.add_argument("project")
        binding.add_argument("--member", required=True, help="user:USERNAME or user:EMAIL")
        binding.add_argument("--role", required=True, help="e.g. roles/ml.viewer")
        binding.set_defaults(func=func)

    users = commands.add_parser("users", help="user accounts (on the server)")
    user_commands = users.add_subparsers(dest="users_command", required=True)
    user_create = data_dir(user_commands.add_parser("create", help="create a user; prints a generated password"))
    user_create.add_argument("username")
    user_create.add_argument("--email")
    user_create.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    user_create.set_defaults(func=cmd_users_create)
    data_dir(user_commands.add_parser("list", help="every account")).set_defaults(func=cmd_users_list)
    set_password = data_dir(
        user_commands.add_parser(
            "set-password", help="give a user a new password (prints a generated one); their sessions end"
        )
    )
    set_password.add_argument("username")
    set_password.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    set_password.set_defaults(func=cmd_users_set_password)
    for verb, func, help_text in (
        ("deactivate", cmd_users_deactivate, "stop a user signing in; ends their sessions, revokes their tokens"),
        ("reactivate", cmd_users_reactivate, "let a deactivated user sign in again"),
    ):
        parser = data_dir(user_commands.add_parser(verb, help=help_text))
        parser.add_argument("username")
        parser.set_defaults(func=func)

    audit = commands.add_parser("audit", help="the audit log (on the server)")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = data_dir(audit_commands.add_parser("verify", help="check the hash chains; exit 1 when tampered"))
    verify.set_defaults(func=cmd_audit_verify)
    purge = data_dir(audit_commands.add_parser("purge", help="delete entries past their retention"))
    purge.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    purge.set_defaults(func=cmd_audit_purge)

    gc = data_dir(
        commands.add_parser("gc", help="remove records and files past the projects' retention (on the server)")
    )
    gc.add_argument("--dry-run", action="store_true", help="list what would be removed and the space it frees")
    gc.add_argument("--project", help="only this project")
    gc.add_argument(
        "--set-retention", type=int, metavar="DAYS", help="set --project's retention: days after a job ends (0: keep)"
    )
    gc.add_argument("--protect-label", help="with --set-retention: jobs carrying this label are kept (as keep=true)")
    gc.set_defaults(func=cmd_gc)
