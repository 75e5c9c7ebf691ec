"""Vertex AI over gRPC (console/grpc_front.py): a notebook that names only the endpoint runs with
the SDK's default transport and default credentials, over TLS checked against the console's own
certificate. The notebook is a separate Python process, as a user's is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from aiconsole import service_keys
from console import grpc_front
from models_registry.models import Model

pytestmark = pytest.mark.django_db(transaction=True)

NOTEBOOK = """
import json, sys
from google.api_core import exceptions
from google.cloud import aiplatform
from google.cloud.aiplatform_v1 import JobServiceClient

endpoint_address, artifacts, probe = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
aiplatform.init(project="project-a", location="us-central1", api_endpoint=endpoint_address)
model = aiplatform.Model.upload(
    display_name="grpc-model",
    artifact_uri=artifacts,
    serving_container_image_uri="us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest",
)
endpoint = model.deploy(machine_type="n1-standard-2")
prediction = endpoint.predict(instances=probe)
jobs = JobServiceClient(client_options={"api_endpoint": endpoint_address})
listed = list(jobs.list_custom_jobs(parent="projects/project-a/locations/us-central1"))
try:
    aiplatform.Model("999")
    missing = "found"
except exceptions.NotFound as error:
    missing = type(error).__name__
try:
    model.deploy(machine_type="n1-standard-2", traffic_split={"0": 50, "999": 50}, endpoint=endpoint)
    refused = "accepted"
except exceptions.GoogleAPICallError as error:
    refused = type(error).__name__ + ": " + error.message
endpoint.undeploy_all()
endpoint.delete()
model.delete()
print(json.dumps({
    "predictions": prediction.predictions,
    "model": prediction.model_resource_name,
    "jobs": len(listed),
    "missing": missing,
    "refused": refused,
}))
"""


def run_notebook(source: str, args: list[str], *, user, live_server, vertex_grpc, gcs_emulator, tmp_path, timeout):
    """Run a notebook as its own Python process, as a user would: the default transport to the gRPC
    address, default credentials from a key file, the console's certificate trusted."""
    key = service_keys.create_key(user, project_id="project-a", token_uri=f"{live_server.url}/oauth2/token")
    key_path = tmp_path / "key.json"
    key_path.write_text(service_keys.key_file_text(key))
    script = tmp_path / "notebook.py"
    script.write_text(textwrap.dedent(source))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_path),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(vertex_grpc.ca_file),
        "STORAGE_EMULATOR_HOST": gcs_emulator.host,
    }
    done = subprocess.run(
        [sys.executable, str(script), f"localhost:{vertex_grpc.port}", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


# The gRPC front, in a process of its own: its port and its CA file on a line, then serving until its
# stdin closes.
FRONT = """
import sys
from pathlib import Path
from console import grpc_front
running = grpc_front.start("127.0.0.1", 0, Path(sys.argv[1]), web_url=sys.argv[2])
print(running.port, running.ca_file, flush=True)
sys.stdin.read()
running.stop(0)
"""


@pytest.fixture
def vertex_grpc(tmp_path, live_server):
    """The gRPC front as 'aiconsole up' runs it, in a process of its own (gRPC's threads must not be in
    a process that forks, and this one forks serving processes), answering through the live web port."""
    front = subprocess.Popen(
        [sys.executable, "-c", FRONT, str(tmp_path / "front"), live_server.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    line = front.stdout.readline()  # empty if it failed to start: its stderr says why
    if not line:
        front.wait(30)
        pytest.fail(f"the gRPC front did not start: {front.stderr.read()[-3000:]}")
    port, ca_file = line.split(maxsplit=1)
    yield SimpleNamespace(port=int(port), ca_file=Path(ca_file.strip()))
    front.stdin.close()
    try:
        front.wait(30)
    except subprocess.TimeoutExpired:
        front.kill()
        front.wait(10)


@pytest.mark.slow
def test_a_notebook_on_the_default_transport_and_credentials_runs_unchanged(
    serving, live_server, admin, project, trained, gcs_emulator, vertex_grpc, tmp_path
):
    gcs_emulator.make_bucket("grpc-models")
    model_file = Path(trained["sklearn"]) / "model.joblib"
    artifacts = gcs_emulator.upload("grpc-models", "census/model.joblib", model_file.read_bytes()).rsplit("/", 1)[0]
    context = {"live_server": live_server, "vertex_grpc": vertex_grpc, "gcs_emulator": gcs_emulator}
    last = run_notebook(
        NOTEBOOK, [artifacts, json.dumps(trained["probe"])], user=admin, tmp_path=tmp_path, timeout=300, **context
    )
    result = json.loads(last)
    assert result["predictions"] == trained["expected"]["sklearn"]
    assert result["model"].startswith("projects/project-a/locations/us-central1/models/")
    assert result["jobs"] == 0 and result["missing"] == "NotFound"
    assert result["refused"].startswith("InvalidArgument") and "trafficSplit" in result["refused"]
    assert not Model.objects.exists()


def test_a_call_without_credentials_or_to_an_unserved_method_is_refused_with_its_status(vertex_grpc, project):
    import grpc
    from google.cloud.aiplatform_v1.types import job_service

    roots = vertex_grpc.ca_file.read_bytes()
    channel = grpc.secure_channel(f"localhost:{vertex_grpc.port}", grpc.ssl_channel_credentials(roots))
    list_jobs = channel.unary_unary(
        "/google.cloud.aiplatform.v1.JobService/ListCustomJobs",
        request_serializer=job_service.ListCustomJobsRequest.serialize,
        response_deserializer=job_service.ListCustomJobsResponse.deserialize,
    )
    request = job_service.ListCustomJobsRequest(parent="projects/project-a/locations/us-central1")
    with pytest.raises(grpc.RpcError) as refused:
        list_jobs(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as bad_token:
        list_jobs(request, metadata=[("authorization", "Bearer not-a-token")], timeout=30)
    assert bad_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
    streaming = channel.unary_unary("/google.cloud.aiplatform.v1.PredictionService/StreamRawPredict")
    with pytest.raises(grpc.RpcError) as unserved:
        streaming(b"", timeout=30)
    assert unserved.value.code() == grpc.StatusCode.UNIMPLEMENTED
    channel.close()


def test_the_certificate_is_made_once_and_remade_for_a_new_name(tmp_path):
    key, chain, ca = grpc_front.ensure_certificate(tmp_path, ["localhost", "127.0.0.1"])
    assert (tmp_path / "grpc" / "server.key").stat().st_mode & 0o777 == 0o600
    assert ca.stat().st_mode & 0o777 == 0o600  # private, as everything in the data dir
    again = grpc_front.ensure_certificate(tmp_path, ["localhost"])
    assert again[0] == key and again[1] == chain
    renamed = grpc_front.ensure_certificate(tmp_path, ["localhost", "console.internal"])
    assert renamed[0] != key and renamed[2] == ca


TRAINING_NOTEBOOK = """
import sys
from google.cloud import aiplatform

endpoint_address, package, output = sys.argv[1:4]
aiplatform.init(project="project-a", location="us-central1", api_endpoint=endpoint_address, staging_bucket="gs://grpc-staging")
job = aiplatform.CustomJob(
    display_name="grpc-training",
    base_output_dir=output,
    worker_pool_specs=[{
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "python_package_spec": {
            "executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
            "package_uris": [package],
            "python_module": "trainer.task",
            "args": ["--epochs", "2"],
        },
    }],
)
job.run()
print(job.state.name)
"""


@pytest.mark.executor
def test_a_custom_job_runs_over_grpc(executor, live_server, admin, project, gcs_emulator, vertex_grpc, tmp_path):
    from django.conf import settings

    from bench.support.packages import build_package
    from jobs.models import Job, LogLine

    gcs_emulator.make_bucket("grpc-staging")
    task = "import sys\nprint('trained over grpc with', sys.argv[1:])\n"
    local = build_package(tmp_path / "built", {"trainer/__init__.py": "", "trainer/task.py": task})
    package = gcs_emulator.upload("grpc-staging", "trainer-0.1.tar.gz", local.read_bytes())
    output = settings.STORAGE_DIR / "outputs" / "project-a" / tmp_path.name
    output.parent.mkdir(parents=True, exist_ok=True)
    context = {"live_server": live_server, "vertex_grpc": vertex_grpc, "gcs_emulator": gcs_emulator}
    last = run_notebook(
        TRAINING_NOTEBOOK, [package, str(output)], user=admin, tmp_path=tmp_path, timeout=600, **context
    )
    assert last == "JOB_STATE_SUCCEEDED"
    job = Job.objects.get(vertex__display_name="grpc-training")
    lines = LogLine.objects.filter(job=job).values_list("message", flat=True)
    assert "trained over grpc with ['--epochs', '2']" in lines


def test_a_port_another_console_serves_is_refused_not_shared(vertex_grpc, tmp_path, live_server):
    with pytest.raises(RuntimeError):
        grpc_front.start("127.0.0.1", vertex_grpc.port, tmp_path / "other", web_url=live_server.url)
