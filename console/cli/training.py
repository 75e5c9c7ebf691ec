"""``jobs submit training``: gcloud's flags and ``--config`` file turned into a v1 Job body.

Everything here is checked before anything is built or uploaded: the YAML, the flag syntax
(accelerators, labels, enums), the Job schema's field names and JSON types, and the few things
without which a submission cannot work (a region, a module, a package). The service rules
(machine types, accelerator counts, tuning specs) are the server's to judge.
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
from pathlib import Path

import yaml

from aiconsole import yamlsafe
from console.cli import gcs, output, packaging
from console.cli.client import Client, CliError
from jobs import catalogue

SCALE_TIER_CHOICES = {name.lower().replace("_", "-"): name for name in catalogue.SCALE_TIERS}
ACCELERATOR_CHOICES = {
    name.lower().replace("_", "-"): name
    for name in catalogue.ACCELERATOR_TYPE_VALUES
    if name != "ACCELERATOR_TYPE_UNSPECIFIED"
}
_PARSE_PHASE = ("Invalid JSON payload received.", "Invalid value at ")


# --- flag value types (argparse reports their errors, naming the flag) ------------------------


def scale_tier(text: str) -> str:
    key = text.strip().lower().replace("_", "-")
    if key not in SCALE_TIER_CHOICES:
        raise argparse.ArgumentTypeError(f"invalid choice {text!r}; choose from: {', '.join(SCALE_TIER_CHOICES)}")
    return SCALE_TIER_CHOICES[key]


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"bad {what} {item!r}: expected KEY=VALUE[,KEY=VALUE...]")
        pairs.append((key.strip(), value.strip()))
    return pairs


def accelerator(text: str) -> dict:
    """``count=N,type=nvidia-tesla-t4`` → an AcceleratorConfig (count as an int64 string)."""
    values: dict[str, str] = {}
    for key, value in _pairs(text, "accelerator setting"):
        if key not in ("count", "type"):
            raise argparse.ArgumentTypeError(
                f"unknown key {key!r} in {text!r}; valid keys are count and type (e.g. count=1,type=nvidia-tesla-t4)"
            )
        values[key] = value
    if "type" not in values:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no accelerator type; write count=N,type=TYPE with "
            f"TYPE one of: {', '.join(ACCELERATOR_CHOICES)}"
        )
    kind = values["type"].lower().replace("_", "-")
    if kind not in ACCELERATOR_CHOICES:
        raise argparse.ArgumentTypeError(
            f"invalid accelerator type {values['type']!r}; choose from: {', '.join(ACCELERATOR_CHOICES)}"
        )
    count = values.get("count", "1")
    if not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"accelerator count must be a positive whole number, not {count!r}")
    return {"count": str(int(count)), "type": ACCELERATOR_CHOICES[kind]}


def labels(text: str) -> dict[str, str]:
    return dict(_pairs(text, "label"))


def label_keys(text: str) -> list[str]:
    return [key.strip() for key in text.split(",") if key.strip()]


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 0, not {text!r}")
    return int(text)


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


class MergeDict(argparse.Action):
    """A repeatable KEY=VALUE flag: later values add to (and override) earlier ones."""

    def __call__(self, parser, namespace, values, option_string=None):
        merged = dict(getattr(namespace, self.dest) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


class ExtendList(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), *values])


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``gcloud ai-platform jobs submit training`` that map onto the API."""
    code = parser.add_argument_group("trainer code")
    code.add_argument(
        "--package-path", metavar="DIR", help="a local Python package folder; built as an sdist and uploaded"
    )
    code.add_argument(
        "--packages",
        type=comma_list,
        action=ExtendList,
        metavar="FILE,...",
        help="trainer packages: local sdists/wheels (uploaded) or gs:// URIs",
    )
    code.add_argument("--module-name", metavar="MODULE", help="the module to run, e.g. trainer.task")
    code.add_argument(
        "--staging-bucket",
        metavar="gs://BUCKET",
        help="upload local packages to this Cloud Storage bucket instead of the console",
    )
    code.add_argument(
        "--config",
        metavar="FILE",
        help="YAML or JSON holding a whole Job (jobId, labels, trainingInput...); flags override it",
    )

    job = parser.add_argument_group("job")
    job.add_argument(
        "--region", help="region (default: trainingInput.region in --config, $AICONSOLE_REGION or the config file)"
    )
    job.add_argument("--job-dir", metavar="PATH", help="output folder, passed to the trainer as --job-dir")
    job.add_argument("--runtime-version")
    job.add_argument("--python-version")
    job.add_argument("--labels", type=labels, action=MergeDict, metavar="KEY=VALUE,...")
    job.add_argument("--service-account", metavar="EMAIL")
    job.add_argument("--enable-web-access", action="store_true", default=None)
    job.add_argument("--network", help="projects/NUMBER/global/networks/NAME")
    job.add_argument("--kms-key", help="KMS key name or full resource name")
    job.add_argument("--kms-keyring")
    job.add_argument("--kms-location")
    job.add_argument("--kms-project")

    machines = parser.add_argument_group("machines")
    machines.add_argument(
        "--scale-tier", type=scale_tier, metavar="TIER", help=f"one of: {', '.join(SCALE_TIER_CHOICES)}"
    )
    accelerator_help = f"count=N,type=TYPE with TYPE one of: {', '.join(ACCELERATOR_CHOICES)}"
    for role, name in (("master", "master"), ("worker", "worker"), ("parameter-server", "parameter server")):
        machines.add_argument(f"--{role}-machine-type", metavar="TYPE", help=f"the {name} machine type")
        machines.add_argument(
            f"--{role}-accelerator", type=accelerator, metavar="count=N,type=TYPE", help=accelerator_help
        )
        machines.add_argument(f"--{role}-image-uri", metavar="IMAGE", help=f"custom container for the {name}")
        if role != "master":
            machines.add_argument(f"--{role}-count", type=count, metavar="N")
    machines.add_argument(
        "--use-chief-in-tf-config",
        type=boolean,
        nargs="?",
        const=True,  # gcloud wants a value; the bare flag means true
        metavar="BOOL",
        help="custom containers: call the master 'chief' in TF_CONFIG",
    )
    machines.add_argument("--tpu-tf-version", help="TensorFlow version of a TPU worker's custom container")


# --- the config file ---------------------------------------------------------------------------

_JOB_FIELDS = ("jobId", "labels", "trainingInput", "predictionInput")


def _plain(value: object) -> object:
    """YAML's dates and times become the strings they were written as (JSON has no dates)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return value


def load_config(path: str) -> dict:
    """The Job in a ``--config`` file, with a message naming the file for every problem."""
    try:
        text = yamlsafe.read_file(path)
        data = yamlsafe.load(text)
    except OSError as error:
        raise CliError(f"--config {path}: cannot read it ({error.strerror or error})", exit_code=2) from None
    except yamlsafe.YamlLimitError as error:
        raise CliError(f"--config {path} is refused: {error}", exit_code=2) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise CliError(f"--config {path} is not valid YAML{where}: {problem}", exit_code=2) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(
            f"--config {path} must hold a Job (a mapping with keys such as trainingInput), not a {type(data).__name__}",
            exit_code=2,
        )
    unknown = [str(key) for key in data if key not in _JOB_FIELDS]
    if unknown:
        raise CliError(
            f"--config {path}: unknown Job field{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}; a Job has {', '.join(_JOB_FIELDS)}",
            exit_code=2,
        )
    if "trainingInput" in data and not isinstance(data["trainingInput"], dict):
        raise CliError(f"--config {path}: trainingInput must be a mapping", exit_code=2)
    return _plain(data)


# --- flags over config -------------------------------------------------------------------------


def _kms_key_name(args, project: str) -> str | None:
    if not args.kms_key:
        if args.kms_keyring or args.kms_location or args.kms_project:
            raise CliError("--kms-keyring, --kms-location and --kms-project need --kms-key", exit_code=2)
        return None
    if args.kms_key.startswith("projects/"):
        return args.kms_key
    missing = [
        flag
        for flag, value in (("--kms-keyring", args.kms_keyring), ("--kms-location", args.kms_location))
        if not value
    ]
    if missing:
        raise CliError(
            f"--kms-key {args.kms_key} is a short name: give {' and '.join(missing)} too, "
            "or the full projects/P/locations/L/keyRings/R/cryptoKeys/K name",
            exit_code=2,
        )
    project = args.kms_project or project
    return f"projects/{project}/locations/{args.kms_location}/keyRings/{args.kms_keyring}/cryptoKeys/{args.kms_key}"


def _config_of(training_input: dict, key: str) -> dict:
    config = training_input.get(key)
    if not isinstance(config, dict):
        config = training_input[key] = {}
    return config


def _paired_count(args, training_input: dict, role: str, type_key: str, count_key: str) -> None:
    machine = getattr(args, f"{role.replace('-', '_')}_machine_type")
    number = getattr(args, f"{role.replace('-', '_')}_count")
    if machine is not None and number is None and count_key not in training_input:
        raise CliError(f"--{role}-machine-type needs --{role}-count", exit_code=2)
    if number is not None and machine is None and type_key not in training_input:
        raise CliError(f"--{role}-count needs --{role}-machine-type", exit_code=2)
    if machine is not None:
        training_input[type_key] = machine
    if number is not None:
        training_input[count_key] = str(number)


def job_body(job_id: str, args, config_job: dict, *, project: str, default_region: str | None) -> dict:
    """The Job to create: the config file's, with every given flag laid over it."""
    body = dict(config_job)
    body["jobId"] = job_id
    training_input = dict(body.get("trainingInput") or {})
    simple = {
        "region": args.region,
        "pythonModule": args.module_name,
        "jobDir": _job_dir(args.job_dir),
        "scaleTier": args.scale_tier,
        "masterType": args.master_machine_type,
        "runtimeVersion": args.runtime_version,
        "pythonVersion": args.python_version,
        "serviceAccount": args.service_account,
        "enableWebAccess": args.enable_web_access,
        "network": args.network,
        "useChiefInTfConfig": args.use_chief_in_tf_config,
    }
    training_input.update({key: value for key, value in simple.items() if value is not None})
    _paired_count(args, training_input, "worker", "workerType", "workerCount")
    _paired_count(args, training_input, "parameter-server", "parameterServerType", "parameterServerCount")
    for role, key in (
        ("master", "masterConfig"),
        ("worker", "workerConfig"),
        ("parameter_server", "parameterServerConfig"),
    ):
        chosen = getattr(args, f"{role}_accelerator")
        if chosen is not None:
            _config_of(training_input, key)["acceleratorConfig"] = chosen
        image = getattr(args, f"{role}_image_uri")
        if image is not None:
            _config_of(training_input, key)["imageUri"] = image
    if args.tpu_tf_version:
        _config_of(training_input, "workerConfig")["tpuTfVersion"] = args.tpu_tf_version
    kms = _kms_key_name(args, project)
    if kms:
        training_input["encryptionConfig"] = {"kmsKeyName": kms}
    if args.user_args:
        training_input["args"] = list(args.user_args)
    if not training_input.get("region") and default_region:
        training_input["region"] = default_region
    if args.labels:
        body["labels"] = {**(body.get("labels") or {}), **args.labels}
    body["trainingInput"] = training_input
    return body


def _job_dir(value: str | None) -> str | None:
    """A local job dir is made absolute: the trainer runs elsewhere, not in this shell's folder."""
    if value is None or "://" in value:
        return value
    return os.path.abspath(os.path.expanduser(value))


def check_before_upload(body: dict, args, *, has_local_packages: bool) -> None:
    """What the submission cannot do without; checked before building or uploading anything."""
    # deferred: the client commands run without Django; only this command needs it
    from jobs import validation as spec

    training_input = body["trainingInput"]
    container = bool((training_input.get("masterConfig") or {}).get("imageUri"))
    problems = []
    if not training_input.get("region"):
        problems.append("--region is required (or trainingInput.region in --config, or $AICONSOLE_REGION)")
    if not container and not training_input.get("pythonModule"):
        problems.append("--module-name is required (or trainingInput.pythonModule in --config)")
    if not container and not has_local_packages and not training_input.get("packageUris"):
        problems.append(
            "give the trainer's code: --package-path DIR or --packages FILE,... "
            "(or trainingInput.packageUris in --config)"
        )
    if container:
        problems += _container_conflicts(training_input, args)
    if training_input.get("scaleTier") == "CUSTOM" and not training_input.get("masterType"):
        problems.append("--master-machine-type is required with --scale-tier custom")
    if args.staging_bucket and not args.staging_bucket.startswith("gs://"):
        problems.append(f"--staging-bucket must be a gs:// URI, not {args.staging_bucket!r}")
    if problems:
        raise CliError("cannot submit the job:\n" + "\n".join(f"  - {p}" for p in problems), exit_code=2)
    # The schema (field names and JSON types) is the frozen v1 wire format, so checking it here
    # cannot disagree with any server; the service rules are left to the server.
    try:
        spec.validate_job(body)
    except spec.SpecError as error:
        parse_errors = [v.description for v in error.violations if v.description.startswith(_PARSE_PHASE)]
        if parse_errors:
            where = f"--config {args.config} (with the flags applied)" if args.config else "the job"
            raise CliError(
                f"{where} does not match the Job schema:\n" + "\n".join(f"  - {p}" for p in parse_errors), exit_code=2
            ) from None


def _container_conflicts(training_input: dict, args) -> list[str]:
    """What a custom container job cannot also have, in gcloud's words: the container brings its
    own runtime (gcloud: "Only one of --master-image-uri, --runtime-version can be set.") and its
    own code, so no package or module either."""
    image = "--master-image-uri" if args.master_image_uri else "masterConfig.imageUri (--config)"
    named = args.master_image_uri or (training_input.get("masterConfig") or {}).get("imageUri") or ""
    from jobs.runtimes.prebuilt import NAME  # deferred: a pattern only, no settings

    # Google's pre-built images run a trainer package (AI Platform's PyTorch images were used so);
    # whether this server builds the one named is the server's to say.
    in_prebuilt = bool(NAME.match(named))
    given = (
        ("--runtime-version", args.runtime_version, "runtimeVersion"),
        ("--package-path", args.package_path, None),
        ("--packages", args.packages, "packageUris"),
        ("--module-name", args.module_name, "pythonModule"),
    )
    problems = []
    for flag, value, field in given:
        name = flag if value else f"{field} (--config)" if field and training_input.get(field) else None
        if name is None or (in_prebuilt and flag != "--runtime-version"):
            continue
        why = "" if flag == "--runtime-version" else " A custom container brings its own code: no package or module."
        problems.append(f"Only one of {image}, {name} can be set.{why}")
    return problems


# --- packages ----------------------------------------------------------------------------------


def local_package_files(args) -> list[Path]:
    """The ``--packages`` entries that are local files; each must exist."""
    found: list[Path] = []
    missing: list[Path] = []
    for item in args.packages or []:
        if item.startswith("gs://"):
            continue
        path = Path(item).expanduser()
        (found if path.is_file() else missing).append(path)
    if missing:
        raise CliError("--packages: no such file: " + ", ".join(str(p) for p in missing), exit_code=2)
    return found


def staging_base(args, body: dict, job_id: str) -> str | None:
    """Where gcloud would stage local packages in Cloud Storage, or None for the console."""
    if args.staging_bucket:
        return f"{args.staging_bucket.rstrip('/')}/{job_id}"
    job_dir = body["trainingInput"].get("jobDir") or ""
    return job_dir.rstrip("/") if job_dir.startswith("gs://") else None


class _ProgressReader:
    """A file that reports how much of it has been read (sent); requests streams it."""

    def __init__(self, handle, size: int, progress: output.ByteProgress):
        self.handle, self.size, self.progress = handle, size, progress

    def read(self, amount: int = -1) -> bytes:
        chunk = self.handle.read(amount)
        self.progress.advance(len(chunk))
        return chunk

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return iter(lambda: self.read(1 << 16), b"")


def upload_to_console(client: Client, package: packaging.Package) -> str:
    progress = output.ByteProgress(f"Uploading {package.path.name} to {client.base}", package.size)
    with package.path.open("rb") as handle:
        answer = client.call(
            "POST",
            client.upload_path("packages"),
            params={"name": package.path.name},
            data=_ProgressReader(handle, package.size, progress),
            headers={"Content-Type": "application/octet-stream"},
            timeout=600,
        )
    progress.finish()
    uri = answer.get("uri")
    if not uri:
        raise CliError(f"the console accepted {package.path.name} but answered without its uri: {answer!r:.200}")
    return uri


def upload_to_gcs(package: packaging.Package, base: str) -> str:
    """Stage a package as gcloud did, with this shell's credentials (the console's are not ours)."""
    uri = f"{base}/packages/{package.sha256}/{package.path.name}"
    progress = output.ByteProgress(f"Uploading {package.path.name} to {uri}", package.size)
    gcs.upload(package.path, uri)
    progress.finish()
    return uri


def stage_packages(client: Client, args, body: dict, job_id: str, local_files: list[Path]) -> list[str]:
    """Build ``--package-path``, upload it and the local ``--packages``; return packageUris."""
    with tempfile.TemporaryDirectory(prefix="aiconsole-package-") as work:
        built: list[packaging.Package] = []
        if args.package_path:
            output.status(f"Building a package from {args.package_path}...")
            try:
                package = packaging.build_sdist(args.package_path, Path(work))
            except packaging.PackagingError as error:
                raise CliError(str(error), exit_code=2) from None
            output.status(f"Built {package.path.name} ({output.human_size(package.size)}; {package.how}).")
            built.append(package)
        built += [packaging.describe(path, "given") for path in local_files]
        base = staging_base(args, body, job_id)
        uploaded = [upload_to_gcs(p, base) if base else upload_to_console(client, p) for p in built]
    remote = [item for item in args.packages or [] if item.startswith("gs://")]
    return uploaded + remote
