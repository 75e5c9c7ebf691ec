"""``aiconsole images list|load|delete`` (a project's uploaded container images, over the REST API)
and ``aiconsole containers status`` (which engine runs containers on this machine, read locally
like ``aiconsole runtimes list``).

An uploaded image is the project's own: only its jobs may run it. Images built or loaded on the
host with ``podman``/``docker`` are not listed here; they run for every project by their name.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from console.cli import common, output
from console.cli.client import CliError
from console.cli.server import setup_django

LOAD_SECONDS = 1800.0  # a large archive is stored, then loaded by the engine, before the answer


@common.command("images.list")
def cmd_list(args) -> int:
    client = common.client(args)
    found = client.get(client.project_path("images")).get("images") or []
    if not found and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [
        [
            image["name"],
            image["imageId"].removeprefix("sha256:")[:12],
            output.human_size(int(image.get("sizeBytes") or 0)),
            image.get("loadedBy") or "-",
            output.local_time(image.get("createTime")),
        ]
        for image in found
    ]
    output.emit_list(found, args.format, output.table(["NAME", "IMAGE_ID", "SIZE", "LOADED_BY", "CREATED"], rows))
    return 0


@common.command("images.load")
def cmd_load(args) -> int:
    client = common.client(args)
    archive = Path(args.file).expanduser()
    if not archive.is_file():
        raise CliError(f"no such file: {archive}", exit_code=2)
    size = archive.stat().st_size
    output.status(f"Uploading {archive.name} ({output.human_size(size)}) to {client.base} as {args.name}...")
    with archive.open("rb") as handle:
        image = client.call(
            "POST",
            client.project_path("images:load"),
            params={"name": args.name},
            data=handle,
            headers={"Content-Type": "application/octet-stream"},
            timeout=LOAD_SECONDS,
        )
    output.status(f"Loaded image [{image.get('name', args.name)}]: jobs of {client.project} can run it.")
    if args.format:
        output.emit(image, args.format)
    return 0


@common.command("images.delete")
def cmd_delete(args) -> int:
    client = common.client(args)
    client.call("DELETE", client.project_path("images") + "/" + quote(args.name, safe="/:"))
    output.status(f"Deleted image [{args.name}].")
    return 0


def cmd_containers_status(args) -> int:
    setup_django(args.data_dir)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs.containers import engine as engines

    described = engines.current().describe()
    if args.json:
        print(json.dumps(described, indent=2, sort_keys=True))
    elif described["engine"] is None:
        print(f"No container engine: custom container jobs are refused.\n{described['reason']}")
    else:
        gpus = described["gpus"]
        print(f"engine:           {described['engine']} {described['version']} ({described['path']})")
        print(f"resource limits:  {'enforced' if described['limitsEnforced'] else 'not enforced on this host'}")
        print(f"GPUs:             {', '.join(gpus) if gpus else 'none can be given to containers'}")
        for note in described["notes"]:
            print(f"note:             {note}")
    return 0 if described["engine"] else 1


def register(commands) -> None:
    images = common.add_group(commands, "images", "a project's uploaded container images: list, load, delete")
    listing = images.add_parser("list", help="list the images uploaded to the project")
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_list)

    load = images.add_parser("load", help="upload an image archive (docker save / podman save output)")
    load.add_argument("file", metavar="FILE", help="the archive: docker-archive or oci-archive, gzipped or not")
    load.add_argument("--name", required=True, help="the name jobs run it by, e.g. gcr.io/my-project/trainer:v1")
    common.connection_flags(load)
    load.set_defaults(func=cmd_load)

    delete = images.add_parser("delete", help="delete one of the project's uploaded images")
    delete.add_argument("name", metavar="NAME")
    common.connection_flags(delete, formats=False)
    delete.set_defaults(func=cmd_delete)

    containers = commands.add_parser("containers", help="the container engine on this machine")
    sub = containers.add_subparsers(dest="containers_command", required=True)
    status = sub.add_parser("status", help="which engine runs containers, whether limits and GPUs work")
    status.add_argument("--json", action="store_true", help="print the description as JSON")
    status.set_defaults(func=cmd_containers_status)
