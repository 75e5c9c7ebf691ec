"""``aiconsole images list|load|delete`` (a project's uploaded container images, over the REST API),
``aiconsole images prebuilt`` (Google's pre-built images this machine builds, read locally)
and ``aiconsole containers status`` (which engine runs containers on this machine, read locally
like ``aiconsole runtimes list``).

An uploaded image is the project's own: only its jobs may run it. Images built or loaded on the
host with ``podman``/``docker`` are not listed here; they run for every project by their name.
"""

from __future__ import annotations

import json
import sys
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


def cmd_prebuilt(args) -> int:
    """Google's pre-built training images this machine builds: which are built, and one built now."""
    setup_django(args.data_dir)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs.containers import prebuilt as building
    from jobs.runtimes import prebuilt

    if args.build:
        recipe = prebuilt.recipe_for(args.build) or prebuilt.catalogue().get(args.build)
        if recipe is None:
            why = f"{args.build} names none of Google's pre-built images; these are built here: "
            why = prebuilt.refusal(args.build) if prebuilt.is_prebuilt(args.build) else why + prebuilt.buildable_text()
            print(f"aiconsole images prebuilt: {why}", file=sys.stderr)
            return 2
        reference = args.build if prebuilt.recipe_for(args.build) else recipe.names[0]
        try:
            building.ensure(reference, lambda line, **_: print(line, flush=True))
        except building.BuildFailed as error:
            print(f"aiconsole images prebuilt: {error}", file=sys.stderr)
            return 1
        print(f"{recipe.name} is built: " + ", ".join(recipe.names))
        return 0
    rows = building.inventory()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("IMAGE", "BUILT", "PYTHON", "FRAMEWORKS", "BUILT FROM")]
    for row in rows:
        built = output.human_size(row["sizeBytes"]) if row["built"] else "-"
        table.append((row["image"], built, row["python"] or "-", row["frameworks"] or "-", row["source"]))
    widths = [max(len(str(line[i])) for line in table) for i in range(len(table[0]) - 1)]
    for line in table:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=False)) + "  " + line[-1])
    print(
        "\nEach is named as Google named it (us-docker.pkg.dev/vertex-ai/training/IMAGE:latest and the other "
        "registries); one not built yet is built when a job names it, or now with --build IMAGE."
    )
    return 0


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

    prebuilt = images.add_parser(
        "prebuilt", help="Google's pre-built training images this machine builds: list them, or build one now"
    )
    prebuilt.add_argument("--build", metavar="IMAGE", help="build one now, e.g. pytorch-cpu.1-13 or its full name")
    prebuilt.add_argument("--json", action="store_true", help="print the list as JSON")
    prebuilt.set_defaults(func=cmd_prebuilt)

    containers = commands.add_parser("containers", help="the container engine on this machine")
    sub = containers.add_subparsers(dest="containers_command", required=True)
    status = sub.add_parser("status", help="which engine runs containers, whether limits and GPUs work")
    status.add_argument("--json", action="store_true", help="print the description as JSON")
    status.set_defaults(func=cmd_containers_status)
