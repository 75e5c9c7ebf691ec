"""Clone and "Resume as new job" give a form that submits as it is: the runtime and Python stay a
pair the server accepts, the Python choices follow the runtime (sorted as versions, never 2.7),
and the new job records the job it came from."""

from __future__ import annotations

from html.parser import HTMLParser

from django.test import Client

from jobs import runtimes, services
from jobs.models import Job
from jobs.web.forms import JobSubmitForm
from tests.helpers.jobs import PACKAGE

SUBMIT = "/projects/project-a/jobs/new/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


class FormValues(HTMLParser):
    """What a browser would post for the job form as the page shows it (no file chosen), and the
    options each select offers."""

    def __init__(self, html: str):
        super().__init__()
        self.data: dict[str, str] = {}
        self.options: dict[str, list[str]] = {}
        self._in_form = False
        self._select: str | None = None
        self._textarea: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == "job-form":
            self._in_form = True
        if not self._in_form:
            return
        name = attrs.get("name")
        if tag == "input" and name and attrs.get("type") not in ("file", "submit"):
            if attrs.get("type") in ("radio", "checkbox"):
                if "checked" in attrs:
                    self.data[name] = attrs.get("value", "on")
            else:
                self.data[name] = attrs.get("value") or ""
        elif tag == "select" and name:
            self._select = name
            self.options[name] = []
            self.data.setdefault(name, "")
        elif tag == "option" and self._select:
            value = attrs.get("value", "")
            self.options[self._select].append(value)
            if "selected" in attrs or len(self.options[self._select]) == 1:
                self.data[self._select] = value
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_form = False
        if tag == "select":
            self._select = None
        if tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea] += data.removeprefix("\n") if not self.data[self._textarea] else data


def current_job(project, actor, job_id: str = "hello_1", **extra) -> Job:
    """A job as the README's first one: runtime ``current``, no pythonVersion."""
    training_input = {
        "scaleTier": "BASIC",
        "packageUris": [PACKAGE],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        "runtimeVersion": "current",
        **extra,
    }
    return services.submit_job(project, {"jobId": job_id, "trainingInput": training_input}, actor=actor)


def test_a_clone_of_a_current_job_without_a_python_submits_as_it_is(project, developer):
    source = current_job(project, developer)
    client = signed_in(developer)
    page = FormValues(client.get(SUBMIT, {"clone": source.job_id}).content.decode())
    assert page.data["runtime_version"] == "current"
    assert page.data["python_version"] == ""  # the runtime's default, as the job had it
    assert page.options["python_version"] == ["", "3.11", "3.12", "3.13"]
    answer = client.post(f"{SUBMIT}?clone={source.job_id}", page.data)
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    clone = Job.objects.get(job_id=page.data["job_id"])
    assert clone.training_input["runtimeVersion"] == "current"
    assert "pythonVersion" not in clone.training_input
    assert clone.cloned_from == source.job_id


def test_resume_as_new_job_submits_as_it_is_and_records_the_study(project, developer):
    spec = {
        "goal": "MAXIMIZE",
        "maxTrials": 2,
        "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 3}],
    }
    source = current_job(project, developer, "study_1", hyperparameters=spec)
    source.state = "SUCCEEDED"
    source.save(update_fields=["state"])
    client = signed_in(developer)
    page = FormValues(client.get(SUBMIT, {"resume": source.job_id}).content.decode())
    answer = client.post(f"{SUBMIT}?resume={source.job_id}", page.data)
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    resumed = Job.objects.get(job_id="study_1_resumed")
    assert resumed.training_input["hyperparameters"]["resumePreviousJobId"] == "study_1"
    assert resumed.cloned_from == "study_1"
    page_html = client.get("/projects/project-a/jobs/study_1_resumed/").content.decode()
    assert 'data-cloned-from="study_1"' in page_html


def test_the_python_choices_follow_the_runtime_sorted_as_versions():
    for name, runtime in runtimes.RUNTIMES.items():
        form = JobSubmitForm(initial={"runtime_version": name})
        offered = [value for value, _ in form.fields["python_version"].choices]
        assert offered[0] == ""  # the runtime's default
        assert offered[1:] == sorted(runtime.pythons, key=lambda v: tuple(map(int, v.split("."))))
        assert "2.7" not in offered
    assert [v for v, _ in JobSubmitForm(initial={"runtime_version": "1.15"}).fields["python_version"].choices] == [
        "",
        "3.7",
    ]


def test_a_python_the_runtime_does_not_run_is_refused_at_the_field(project, developer):
    data = {
        "job_id": "pair_1",
        "python_module": "trainer.task",
        "package_uris": PACKAGE,
        "region": "us-central1",
        "runtime_version": "current",
        "python_version": "3.7",
        "scale_tier": "BASIC",
    }
    answer = signed_in(developer).post(SUBMIT, data)
    assert answer.status_code == 200
    errors = answer.context["form"].errors["python_version"]
    assert errors == [
        "Runtime version current runs on Python 3.11, 3.12, 3.13: Python 3.7 is not one of them. "
        "Choose one of those, or the runtime's default."
    ]
    assert not Job.objects.filter(job_id="pair_1").exists()


def test_a_forged_source_is_not_recorded(project, developer):
    data = {
        "job_id": "forged_1",
        "python_module": "trainer.task",
        "package_uris": PACKAGE,
        "region": "us-central1",
        "runtime_version": "2.11",
        "scale_tier": "BASIC",
        "cloned_from": "no_such_job",
    }
    assert signed_in(developer).post(SUBMIT, data).status_code == 302
    assert Job.objects.get(job_id="forged_1").cloned_from == ""


def test_a_refused_submit_lists_its_errors_at_the_top_linked_to_the_fields(project, developer):
    data = {
        "job_id": "9bad",
        "python_module": "trainer.task",
        "package_uris": PACKAGE,
        "region": "us-central1",
        "runtime_version": "current",
        "python_version": "3.7",
        "scale_tier": "BASIC",
    }
    html = signed_in(developer).post(SUBMIT, data).content.decode()
    summary = html[html.index("data-error-summary") : html.index("</div>", html.index("data-error-summary"))]
    assert html.index("data-error-summary") < html.index('id="id_job_id"')  # above the first field
    assert 'href="#id_python_version"' in summary and "Python version: Runtime version current runs on" in summary
    assert 'value="9bad"' in html  # what the user typed is kept


def test_the_estimate_says_which_workers_lack_a_machine_type(project, developer):
    data = {
        "job_id": "est_1",
        "python_module": "trainer.task",
        "package_uris": PACKAGE,
        "region": "us-central1",
        "runtime_version": "2.11",
        "scale_tier": "CUSTOM",
        "master_type": "n1-standard-4",
        "worker_count": "2",
    }
    html = signed_in(developer).post("/projects/project-a/jobs/new/preview/", data).content.decode()
    assert "<strong data-units>—</strong>" in html
    assert "Workers: choose a machine type for the 2, or set the count to 0" in html
