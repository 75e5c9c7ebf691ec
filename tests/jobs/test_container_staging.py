"""What a container is given (its job dir, replica folder, inputs and variables) reaches it through
the console's private folder: never through a path a trainer can change, never on a command line.

The engine resolves a bind mount's source as root when the container starts. A trainer of the same
project that owns a folder on the job dir's path swaps it for a link (``renameat2`` exchange) over
and over, while the project's container jobs start with their job dir through it: no container may
ever see or write the link's target. A container's variables (a Vertex job's ``containerSpec.env``)
are in no process's command line, where every account could read them. CI runs as root, so these
run there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.conf import settings

from aiconsole import trainer_user
from bench.support.images import make_image
from bench.support.waiting import wait_for
from jobs import services
from jobs.containers import staged as staging
from jobs.models import TERMINAL_STATES, Job
from tests.helpers.images import require_engine
from tests.helpers.jobs import log_text

pytestmark = [
    pytest.mark.executor,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a console running as root switches accounts"),
]

# The trainer that races: its job dir holds ``d`` (a real folder) and ``link`` (to the target),
# exchanged atomically as fast as it can.
SWAPPER = """
    import ctypes
    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    target = sys.argv[sys.argv.index("--target") + 1]
    real, link = os.path.join(job_dir, "d"), os.path.join(job_dir, "link")
    os.makedirs(real, exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(target, link)
    libc = ctypes.CDLL(None, use_errno=True)
    print("SWAPPING", flush=True)
    deadline, swaps = time.time() + float(sys.argv[sys.argv.index("--seconds") + 1]), 0
    while time.time() < deadline:
        libc.renameat2(-100, real.encode(), -100, link.encode(), 2)  # RENAME_EXCHANGE
        swaps += 1
    print("SWAPS", swaps, flush=True)
"""

# The container: what its job dir shows, and a file written there.
PEEKER = """
while [ $# -gt 0 ]; do
  if [ "$1" = "--job-dir" ]; then job_dir="$2"; fi
  shift
done
if [ -e "$job_dir/not-yours.txt" ]; then echo "SAW-THE-TARGET"; fi
echo "written by a container" > "$job_dir/planted-$(date +%s%N)" && echo "WROTE"
"""


@pytest.fixture
def target(tmp_path_factory) -> Path:
    """A folder outside the project's, that any account could read and write if it got it mounted."""
    folder = tmp_path_factory.mktemp("not-yours")
    folder.chmod(0o777)
    (folder / "not-yours.txt").write_text("another's files")
    (folder / "not-yours.txt").chmod(0o644)
    return folder


def test_a_trainer_swapping_its_job_dir_for_a_link_never_gets_another_folder_mounted(
    executor, job_body, package_factory, project, admin, target
):
    engine = require_engine()
    image = make_image(engine, PEEKER)
    race = settings.STORAGE_DIR / "job-dirs" / "project-a" / "race"
    swapper = services.submit_job(
        project,
        job_body(
            "swapper", package_factory(SWAPPER), jobDir=str(race), args=["--target", str(target), "--seconds", "150"]
        ),
        actor=admin,
    )
    wait_for(lambda: "SWAPPING" in log_text(swapper), 180, message="the swapping trainer to start")
    started, rounds, outcomes = time.monotonic(), 0, {"ran": 0, "refused": 0}
    seen = []
    try:
        while time.monotonic() - started < 65 and rounds < 3000:
            rounds += 1
            body = {
                "jobId": f"peek_{rounds}",
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "region": "us-central1",
                    "masterConfig": {"imageUri": image},
                    "jobDir": str(race / "d"),
                },
            }
            try:
                job = services.submit_job(project, body, actor=admin)
            except Exception:  # the path changed under the submit's own check
                outcomes["refused"] += 1
                continue
            wait_for(lambda pk=job.pk: Job.objects.get(pk=pk).state in TERMINAL_STATES, 120, message="a peeking job")
            text = log_text(job)
            outcomes["ran" if "WROTE" in text else "refused"] += 1
            if "SAW-THE-TARGET" in text:
                seen.append(job.job_id)
    finally:
        services.cancel_job(Job.objects.get(pk=swapper.pk), actor=admin)
        wait_for(lambda: Job.objects.get(pk=swapper.pk).state in TERMINAL_STATES, 60, message="the swapper to stop")

    assert seen == []
    assert sorted(p.name for p in target.iterdir()) == ["not-yours.txt"]
    print("outcomes", outcomes)
    assert outcomes["ran"] >= 5 and time.monotonic() - started >= 60, outcomes
    # Every mount point released: a container is removed, and what it was given with it, just after
    # its job's end is recorded.
    wait_for(
        lambda: not (staging.root().exists() and any(staging.root().iterdir())),
        30,
        message="every mount point to be released",
    )


def test_a_folder_reached_through_a_link_is_refused_not_mounted(db, project, target):
    account = trainer_user.for_project(project)
    area = settings.STORAGE_DIR / "job-dirs" / "project-a"
    area.mkdir(parents=True, exist_ok=True)
    (area / "through-a-link").unlink(missing_ok=True)
    (area / "through-a-link").symlink_to(target)

    staged = staging.Staged("aic-test-link", account)
    with pytest.raises(staging.StagingRefused, match="through-a-link cannot be mounted in the container"):
        staged.volumes([area / "through-a-link"], [])

    assert not (staging.root() / "aic-test-link").exists()


def test_a_staged_folder_is_the_one_opened_and_is_released_with_its_container(db, project):
    account = trainer_user.for_project(project)
    job_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "staged"
    job_dir.mkdir(parents=True, exist_ok=True)
    account.hand_over(job_dir)
    (job_dir / "mine.txt").write_text("the job's own")

    staged = staging.Staged("aic-test-staged", account)
    volumes = staged.volumes([job_dir], [])
    point = Path(volumes[1].split(":")[0])
    try:
        assert volumes[1].endswith(f":{job_dir}:rw")
        assert point.is_relative_to(staging.root()) and (point / "mine.txt").read_text() == "the job's own"
    finally:
        staged.release()

    assert not point.exists() and (job_dir / "mine.txt").exists()  # unmounted, never emptied
    assert job_dir.stat().st_uid == account.uid


# --- a container's variables -----------------------------------------------------------------------

ENV_PRINTER = """
echo "KEY=$WANDB_API_KEY"
printf '%s\\n' "$PEM_KEY" | while read -r line; do echo "PEM:$line"; done
echo "READY"
sleep 120
"""


def _command_lines_holding(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in argv:
            found.append(argv.replace(b"\0", b" ").decode(errors="replace")[:200])
    return found


def test_a_containers_variables_reach_it_and_no_command_line_on_the_host(executor, project, admin):
    from jobs.vertex import services as vertex

    engine = require_engine()
    secret = f"wandb-{os.urandom(12).hex()}"
    pem = f"-----BEGIN KEY-----\n{os.urandom(8).hex()}\n-----END KEY-----"
    body = {
        "displayName": "env-secrets",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": make_image(engine, ENV_PRINTER),
                        "env": [{"name": "WANDB_API_KEY", "value": secret}, {"name": "PEM_KEY", "value": pem}],
                    },
                }
            ]
        },
    }
    job, _ = vertex.create_job(project, "us-central1", "customJobs", body, actor=admin)
    try:
        wait_for(lambda: "READY" in log_text(job), 120, message="the container to print its variables")
        leaked = _command_lines_holding(secret) + _command_lines_holding(pem.splitlines()[1])
        text = log_text(job)
    finally:
        services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)
        wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 60, message="the job to stop")

    assert leaked == []
    assert f"KEY={secret}" in text
    assert [line.removeprefix("PEM:") for line in text.splitlines() if line.startswith("PEM:")] == pem.splitlines()
    folder = staging.root() / f"aic-{trainer_user.console_tag()}-r{job.replicas.get().pk}"
    wait_for(lambda: not folder.exists(), 30, message="its env file to go with its container")
