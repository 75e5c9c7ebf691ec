"""Google's pre-built training images, built on this machine the first time a job names one.

The shipped recipes build PyTorch and the runtime versions' stacks from Debian and the package
index, which takes minutes and gigabytes (bench/prebuilt.py measures the real PyTorch one). Here a
site recipe (``AICONSOLE_PREBUILT_IMAGES``) of the same shape builds a stand-in in seconds, through
every step the real ones take: mmdebstrap from a Debian repository (a local one, holding a stand-in
"native" package), this machine's Python copied in with the libraries the root lacks, a stand-in
framework wheel from the package index (a local find-links folder), imported and tagged with every
name Google used. Jobs then name it as users do: a trainer package in it (AI Platform's
``--master-image-uri`` with ``--package-path``), a container job, a Vertex AI executorImageUri.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess

import pytest

from aiconsole import storage, trainer_user
from aiconsole.errors import InvalidArgument
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from jobs import services
from jobs.models import TERMINAL_STATES, Job, LogLine
from jobs.runtimes import prebuilt
from jobs.vertex import translate
from tests.helpers.images import require_engine

pytestmark = [
    pytest.mark.executor,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="mmdebstrap builds a root as root; CI runs as root"),
]

STANDIN = "standin-cpu.0-1"

FRAMEWORK = {
    "aicstandin/__init__.py": """
        __version__ = "0.1"

        def native():
            with open("/usr/share/aicstandin/native.txt") as handle:
                return handle.read().strip()
    """
}

TRAINER = {
    "trainer/task.py": """
        import argparse, os, sys
        import aicstandin, aicextra

        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--job-dir")
        args = parser.parse_args()
        print("framework", aicstandin.__version__, aicstandin.native())
        print("extra", aicextra.VALUE)
        print("python", sys.version.split()[0], "as", os.getuid(), "epochs", args.epochs)
        os.makedirs(args.job_dir, exist_ok=True)
        with open(os.path.join(args.job_dir, "model.txt"), "w") as out:
            out.write("trained")
        print("model written")
    """
}


def _deb(folder, name: str, files: dict[str, str]) -> None:
    """A Debian package of ``files`` and a flat repository index beside it."""
    tree = folder / name
    (tree / "DEBIAN").mkdir(parents=True)
    control = f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: tests <tests@localhost>\nDescription: x\n"
    (tree / "DEBIAN" / "control").write_text(control)
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    for path in [tree, *tree.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # dpkg-deb refuses a control folder others cannot read
    deb = folder / f"{name}_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, capture_output=True)
    data = deb.read_bytes()
    (folder / "Packages").write_text(
        control + f"Filename: ./{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n\n"
    )


@pytest.fixture
def standin(tmp_path_factory, monkeypatch, settings):
    """The stand-in recipe, its Debian repository and its index; its images removed afterwards."""
    engine = require_engine()
    for tool in ("mmdebstrap", "dpkg-deb"):
        if shutil.which(tool) is None:
            message = f"{tool} is not installed (scripts/install-container-engine installs it)"
            if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
                pytest.fail(f"CI builds pre-built images: {message}")
            pytest.skip(message)
    folder = tmp_path_factory.mktemp("prebuilt")
    repository = folder / "debian"
    repository.mkdir()
    _deb(repository, "aic-standin-native", {"usr/share/aicstandin/native.txt": "stand-in native part\n"})
    links = folder / "index"
    build_package(links, FRAMEWORK, name="aicstandin", version="0.1", kind="wheel")
    build_package(links, {"aicextra/__init__.py": "VALUE = '2.0'\n"}, name="aicextra", version="2.0", kind="wheel")
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # a package index: every account may read it
    folder.chmod(0o755)
    recipes = folder / "site.toml"
    recipes.write_text(
        f"""
[defaults]
debian = []
python_tools = []
variant = "extract"
mirror = "deb [trusted=yes] copy://{repository} ./"

[image."{STANDIN}"]
python = "3.11"
debian = ["aic-standin-native"]
pip = ["aicstandin==0.1"]
registries = ["vertex", "ai-platform"]
"""
    )
    settings.PREBUILT_IMAGES = str(recipes)
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    yield engine
    built = engine.call("images", "--quiet", "--filter", f"label=ai-console.prebuilt={STANDIN}").split()
    for image_id in dict.fromkeys(built):
        subprocess.run(engine.command("rmi", "--force", image_id), capture_output=True, env=engine.environment())


def _run(project, admin, body: dict) -> tuple[Job, list[str]]:
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 300, message=f"{body['jobId']} to end")
    job.refresh_from_db()
    return job, list(LogLine.objects.filter(job=job).order_by("pk").values_list("message", flat=True))


def test_a_package_runs_in_a_pre_built_image_built_here_once_and_named_as_google_named_it(
    standin, executor, project, admin, settings
):
    package = build_package(
        settings.STORAGE_DIR / "tmp-packages", TRAINER, requires=["aicstandin", "aicextra==2.0"], kind="wheel"
    )
    stored = storage.save_upload(io.BytesIO(package.read_bytes()), package.name, project="project-a")
    job_dir = settings.STORAGE_DIR / "outputs" / "project-a" / "standin" / "job"
    job, log = _run(
        project,
        admin,
        {
            "jobId": "pytorch_style",
            "trainingInput": {
                "scaleTier": "BASIC",
                "region": "us-central1",
                # as AI Platform's pre-built PyTorch images were submitted: --master-image-uri, --package-path
                "masterConfig": {"imageUri": f"gcr.io/cloud-ml-public/training/{STANDIN}"},
                "packageUris": [str(stored)],
                "pythonModule": "trainer.task",
                "args": ["--epochs", "2"],
                "jobDir": str(job_dir),
            },
        },
    )

    assert job.state == "SUCCEEDED", (job.error_message, log)
    assert any(line.startswith(f"Building Google's pre-built image {STANDIN} on this machine") for line in log)
    assert any(line.startswith("Debian bookworm (extract): ") for line in log), "the build's progress is in the log"
    assert "framework 0.1 stand-in native part" in log  # the image's own framework, with its Debian part
    assert "extra 2.0" in log  # a requirement the image lacks, installed for it
    assert any(line.startswith("python 3.11.") and line.endswith("as 0 epochs 2") for line in log)
    account = trainer_user.for_project(project)
    model = job_dir / "model.txt"
    assert model.read_text() == "trained" and (model.stat().st_uid, model.stat().st_gid) == (account.uid, account.gid)

    recipe = prebuilt.catalogue()[STANDIN]
    ids = {standin.inspect_image(name)["Id"] for name in [*recipe.names, recipe.local_name]}
    assert len(ids) == 1, "every name Google used is the one image built here"
    assert set(recipe.names) >= {
        f"us-docker.pkg.dev/vertex-ai/training/{STANDIN}:latest",
        f"gcr.io/cloud-aiplatform/training/{STANDIN}:latest",
        f"gcr.io/cloud-ml-public/training/{STANDIN}:latest",
    }

    # A container job naming it by Vertex's name, with a .pyNNN suffix: built already, so no build.
    again, log = _run(
        project,
        admin,
        {
            "jobId": "container_style",
            "trainingInput": {
                "scaleTier": "BASIC",
                "region": "us-central1",
                "masterConfig": {
                    "imageUri": f"us-docker.pkg.dev/vertex-ai/training/{STANDIN}.py311:latest",
                    "containerCommand": [
                        "python",
                        "-c",
                        "import aicstandin; print('container sees', aicstandin.native())",
                    ],
                },
            },
        },
    )
    assert again.state == "SUCCEEDED", (again.error_message, log)
    assert "container sees stand-in native part" in log
    assert not any("Building Google's pre-built image" in line for line in log)


def test_what_cannot_be_built_here_is_refused_at_submit_with_what_can(standin, project, admin):
    for image, needs in (
        ("gcr.io/cloud-ml-public/training/pytorch-gpu.1-13", "NVIDIA GPUs"),
        ("us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-13.py310:latest", "XLA"),
        ("us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.9-9:latest", "version 9.9"),
    ):
        body = {
            "jobId": "refused",
            "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "masterConfig": {"imageUri": image}},
        }
        with pytest.raises(InvalidArgument) as refused:
            services.submit_job(project, body, actor=admin)
        message = str(refused.value.details)
        assert "master_config.image_uri" in message and needs in message, message
        assert "pytorch-cpu.1-4, 1-6" in message and f"{STANDIN.split('.')[0]}.0-1" in message, message


def test_a_package_names_a_pre_built_image_only_as_google_allowed(project, admin):
    body = {
        "jobId": "custom_with_package",
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": "gcr.io/my-project/trainer:v1"},
            "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
        },
    }
    with pytest.raises(InvalidArgument) as refused:
        services.submit_job(project, body, actor=admin)
    assert "packageUris cannot be set together with imageUri" in str(refused.value.details)


def test_vertex_executor_image_uri_of_a_buildable_image_runs_the_package_in_it():
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "pythonPackageSpec": {
                    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13.py310:latest",
                    "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
                    "pythonModule": "trainer.task",
                },
            }
        ]
    }
    done = translate.custom_job({"displayName": "torch", "jobSpec": spec}, location="us-central1")
    assert done.training_input["masterConfig"]["imageUri"].endswith("pytorch-cpu.1-13.py310:latest")
    assert done.training_input["pythonModule"] == "trainer.task" and "runtimeVersion" not in done.training_input
    # scikit-learn-cpu.0-23 (Vertex's older name) runs on runtime 2.3, which has scikit-learn 0.23.
    spec["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] = (
        "us-docker.pkg.dev/vertex-ai/training/scikit-learn-cpu.0-23:latest"
    )
    assert (
        translate.custom_job({"displayName": "sk", "jobSpec": spec}, location="us-central1").training_input[
            "runtimeVersion"
        ]
        == "2.3"
    )
