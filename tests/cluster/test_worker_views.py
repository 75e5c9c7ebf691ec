"""The workers page: platform admins see every worker and what runs on it; nobody else sees it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers.jobs import submit


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root_admin", "root@example.com", "pw-root")


@pytest.fixture
def workers(db):
    from jobs.models import Worker

    live = Worker.objects.create(
        name="gpu-host-1",
        hostname="gpu-host",
        address="10.0.0.5",
        region="us-central1",
        accelerators={"NVIDIA_TESLA_T4": 2},
        cpus=16,
        memory_gb=64,
        containers=True,
    )
    lost = Worker.objects.create(
        name="old-host-1",
        hostname="old-host",
        address="10.0.0.6",
        region="us-east1",
        cpus=4,
        memory_gb=16,
        heartbeat=timezone.now() - timedelta(minutes=5),
    )
    return live, lost


def test_platform_admin_sees_live_workers_and_their_replicas(client, superuser, workers, project, admin):
    from jobs.models import Replica, ReplicaState

    live, _ = workers
    job = submit(project, "busy_job", admin)
    Replica.objects.create(
        job=job,
        task_type="master",
        task_index=0,
        label="master-replica-0",
        machine_type="n1-standard-4",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
        state=ReplicaState.RUNNING,
        worker=live,
        devices="1",
        host="10.0.0.5",
        port=20001,
    )
    client.force_login(superuser)
    page = client.get("/workers/").content.decode()
    assert "gpu-host-1" in page and "2 × NVIDIA_TESLA_T4" in page
    assert "busy_job</a> master-replica-0 (GPUs 1)" in page
    assert "12 CPUs, 49 GB, 1 devices" in page  # what is left: 16 - 4 CPUs, 64 - 15 GB, one T4
    assert "runs custom containers" in page  # it registered with a container engine
    assert "old-host-1" not in page
    assert "1 stopped or lost worker not shown" in page
    assert "old-host-1" in client.get("/workers/?all=1").content.decode()


def test_the_page_names_the_coordinator_and_a_worker_that_can_never_run_a_replica(client, superuser, workers):
    from jobs.models import CoordinatorLease, Worker

    live, _ = workers
    Worker.objects.create(
        name="tiny-host-1", hostname="tiny-host", address="10.0.0.8", region="us-central1", cpus=1, memory_gb=2
    )
    Worker.objects.filter(pk=live.pk).update(pid=4242)
    CoordinatorLease.objects.create(
        pk=1, holder="coordinator:gpu-host:4242:ab12cd", epoch=3, expires=timezone.now() + timedelta(seconds=5)
    )
    client.force_login(superuser)
    page = client.get("/workers/").content.decode()
    assert "Coordinator: worker gpu-host-1 (epoch 3)." in page
    assert "holds no machine type it takes: the smallest, n1-highmem-2, needs 2 CPUs" in page
    CoordinatorLease.objects.filter(pk=1).update(
        holder="coordinator:web-host:77:ef34ab", expires=timezone.now() - timedelta(seconds=1)
    )
    page = client.get("/workers/").content.decode()
    assert "Coordinator: the web process on web-host (pid 77) (epoch 3); its lease ran out" in page


def test_a_worker_without_capacity_shows_its_slots(client, superuser, project, admin):
    from jobs.models import Replica, ReplicaState, Worker

    labels = Worker.objects.create(
        name="small-host-1",
        hostname="small-host",
        address="10.0.0.7",
        region="us-central1",
        cpus=2,
        memory_gb=4,
        slots=4,
    )
    job = submit(project, "basic_job", admin)
    Replica.objects.create(
        job=job,
        task_type="master",
        task_index=0,
        label="master-replica-0",
        machine_type="standard",
        state=ReplicaState.RUNNING,
        worker=labels,
        host="10.0.0.7",
        port=20001,
    )
    client.force_login(superuser)
    page = client.get("/workers/").content.decode()
    assert "labels, 4 slots" in page and "<td>3 slots</td>" in page


def test_project_admin_gets_404(client, admin, workers):
    client.force_login(admin)
    assert client.get("/workers/").status_code == 404


def test_anonymous_is_sent_to_sign_in(client, workers):
    response = client.get("/workers/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_embedded_mode_explains_there_are_no_workers(client, superuser):
    client.force_login(superuser)
    assert "has no workers" in client.get("/workers/").content.decode()
