"""``aiconsole auth``: remember the console's address, a token and a project in the config file.

``login`` checks the token against the console before saving it (``--no-verify`` skips that);
``logout`` forgets the token; ``status`` says which settings are in effect and where each comes
from; ``print-access-token`` prints the token in use, for scripts (``curl -H "Authorization:
Bearer $(aiconsole auth print-access-token)"``).
"""

from __future__ import annotations

import getpass
import sys

from console.cli import common, config, output
from console.cli.client import ApiError, Client, CliError


def _read_token(args) -> str:
    if args.token:
        return args.token.strip()
    if sys.stdin.isatty():
        token = getpass.getpass("API token (from 'aiconsole token create USER' on the console's machine): ")
    else:
        token = sys.stdin.readline()
    token = token.strip()
    if not token:
        raise CliError("no token given: pass --token, pipe it on stdin, or type it at the prompt", exit_code=2)
    return token


def _verify(settings: config.Resolved) -> None:
    client = Client(settings)
    try:
        client.get(client.project_path("jobs"), params={"pageSize": 1})
    except ApiError as error:
        if error.code == 401:
            raise CliError(
                f"the console at {settings.url} refused the token: {error.api_message.splitlines()[0]}"
                " Nothing was saved."
            ) from None
        if error.code in (403, 404):
            output.status(
                f"WARNING: the token works, but project {settings.project!r} is not visible to it "
                f"({error.status}); choose another with --project."
            )
            return
        raise


@common.command("auth.login")
def cmd_login(args) -> int:
    saved = config.load_file()
    current = config.resolve({"url": args.url, "project": args.project, "region": args.region})
    token = _read_token(args)
    settings = config.Resolved(url=current.url, token=token, project=current.project, region=current.region, sources={})
    if not args.no_verify:
        _verify(settings)
    path = config.save_file(
        {
            **saved,
            "url": settings.url,
            "token": token,
            "project": settings.project,
            "region": settings.region or saved.get("region"),
        }
    )
    output.status(
        f"Saved the console's address ({settings.url}), project ({settings.project}) and token "
        f"to {path} (readable by you only)."
    )
    return 0


@common.command("auth.logout")
def cmd_logout(args) -> int:
    saved = config.load_file()
    path = config.config_path()
    if "token" not in saved:
        output.status(f"No token saved in {path}.")
        return 0
    saved.pop("token")
    if saved:
        config.save_file(saved)
        output.status(f"Removed the token from {path}.")
    else:
        config.delete_file()
        output.status(f"Removed {path}.")
    return 0


def _masked(token: str) -> str:
    return token[:4] + "…" + token[-4:] if len(token) > 12 else "…"


@common.command("auth.status")
def cmd_status(args) -> int:
    settings = common.settings(args)
    print(f"config file: {config.config_path()}")
    print(f"url:         {settings.url}  (from {settings.sources['url']})")
    print(f"project:     {settings.project}  (from {settings.sources['project']})")
    if settings.region:
        print(f"region:      {settings.region}  (from {settings.sources['region']})")
    if settings.token:
        print(f"token:       {_masked(settings.token)}  (from {settings.sources['token']})")
    else:
        print("token:       none (run 'aiconsole auth login' or set $AICONSOLE_TOKEN)")
    return 0


@common.command("auth.print-access-token")
def cmd_print_token(args) -> int:
    settings = common.settings(args)
    if not settings.token:
        raise CliError("no token: run 'aiconsole auth login' or set $AICONSOLE_TOKEN")
    print(settings.token)
    return 0


def register(commands) -> None:
    auth = common.add_group(commands, "auth", "remember the console's address and your API token")

    login = auth.add_parser("login", help="save the console's address, a token and a project")
    login.add_argument("--region", help="default region for jobs submit training")
    login.add_argument("--no-verify", action="store_true", help="save without checking the token")
    common.connection_flags(login, formats=False)
    login.set_defaults(func=cmd_login)

    logout = auth.add_parser("logout", help="forget the saved token")
    logout.set_defaults(func=cmd_logout)

    status = auth.add_parser("status", help="show the settings in effect and where each comes from")
    common.connection_flags(status, formats=False)
    status.set_defaults(func=cmd_status)

    print_token = auth.add_parser("print-access-token", help="print the token in use")
    common.connection_flags(print_token, formats=False)
    print_token.set_defaults(func=cmd_print_token)
