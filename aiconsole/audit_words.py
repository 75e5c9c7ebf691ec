"""An audit entry in plain words, beside its method name: "cancelled job to_cancel_1".

The method names are the original's gRPC names (``google.cloud.ml.v1.JobService.CancelJob``),
which say what happened only to someone who knows them. ``sentence`` reads the verb and the
resource from the method's last part and the resource name; a few methods whose words would
mislead get their own phrase. Pure: plain strings in, a string out.
"""

from __future__ import annotations

import re

PAST = {
    "Cancel": "cancelled",
    "Change": "changed",
    "Create": "created",
    "Deactivate": "deactivated",
    "Delete": "deleted",
    "Download": "downloaded",
    "Explain": "asked for explanations from",
    "Get": "read",
    "List": "listed",
    "Load": "loaded",
    "Open": "opened",
    "Close": "closed",
    "Patch": "updated",
    "Predict": "sent predictions to",
    "Purge": "purged",
    "Reactivate": "reactivated",
    "Revoke": "revoked",
    "Set": "set",
    "Test": "tested",
    "Update": "updated",
    "Upload": "uploaded",
    "Use": "used",
}
# Methods whose own words would say something else: the phrase, with {name} the resource's short name.
PHRASES = {
    "JobService.CreateJob": "submitted job {name}",  # with the job it made; else to the project
    "LoggingServiceV2.ListLogEntries": "read the log of job {job}",
    "OutputService.ListOutputs": "listed {path} of job {job}",
    "OutputService.GetOutput": "previewed {path} of job {job}",
    "OutputService.DownloadOutput": "downloaded {path} of job {job}",
    "IAMPolicy.GetIamPolicy": "read who has roles on {kind} {name}",
    "IAMPolicy.SetIamPolicy": "changed who has roles on {kind} {name}",
    "IAMPolicy.TestIamPermissions": "tested their permissions on {kind} {name}",
    "OnlinePredictionService.Predict": "sent predictions to {kind} {name}",
    "ProjectManagementService.GetConfig": "read the service account of project {name}",
    "LoginService.Login": "signed in",
    "LoginService.LockOut": "was locked out after failed sign-ins",
    "ModelService.SetDefaultVersion": "made version {name} the default",
    "UserService.UsePasswordLink": "set their password with a one-time link",
    "UserService.CreatePasswordLink": "made a one-time password link for {name}",
    "UserService.ChangePassword": "changed their own password",
    "UserService.SetPlatformAdmin": "changed whether {name} is a platform admin",
    "AuditService.PurgeEntries": "purged audit entries past their retention",
    "TokenService.CreateToken": "created an API token for user {name}",
    "TokenService.RevokeToken": "revoked API token {name}",
    "PackageService.UploadPackage": "uploaded a trainer package to project {name}",
    "DataService.UploadDataFile": "uploaded a data file to project {name}",
    "ImageService.LoadImage": "loaded a container image into project {name}",
    "ModelService.UploadModel": "uploaded a model file to project {name}",
    "WebAccessService.OpenShell": "opened a shell into {replica} of job {job}",
    "WebAccessService.CloseShell": "closed a shell into {replica} of job {job}",
    "WebAccessService.GetRecording": "downloaded the recording of a shell into {replica} of job {job}",
}
# The resource kind a path segment names: projects/p/jobs/j → "job".
KINDS = {
    "projects": "project",
    "jobs": "job",
    "models": "model",
    "versions": "version",
    "operations": "operation",
    "users": "user",
    "tokens": "token",
    "images": "image",
    "customJobs": "custom job",
    "hyperparameterTuningJobs": "hyperparameter tuning job",
}
# Path segments that say where a resource is, not what: Vertex AI's projects/p/locations/l/customJobs/1.
PLACES = ("locations",)


def _words(camel: str) -> list[str]:
    return re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", camel)


def _resource(resource_name: str) -> tuple[str, str, dict]:
    """``projects/p/jobs/j/outputs/a/b`` → ("job", "j", {"job": "j", "path": "a/b", …})."""
    parts = resource_name.split("/")
    found: dict[str, str] = {}
    kind, name = "", resource_name
    index = 0
    while index + 1 < len(parts):
        key, value = parts[index], parts[index + 1]
        if key in KINDS:
            kind, name = KINDS[key], value
            found[KINDS[key]] = value
            index += 2
            continue
        if key in PLACES:
            index += 2
            continue
        if key == "webAccess":
            found["replica"] = "/".join(parts[index + 1 :])
        if key in ("outputs", "logs"):
            tail = "/".join(parts[index + 1 :])
            found["path"] = tail or "the folder"
        break
    found.setdefault("path", "the folder")
    return kind, name, found


def sentence(method_name: str, resource_name: str, *, granted: bool = True, created: str = "") -> str:
    """What the entry says happened, as a sentence without its subject ("cancelled job j")."""
    service, _, method = method_name.rpartition(".")
    key = f"{service.rpartition('.')[2]}.{method}"
    kind, name, parts = _resource(created or resource_name)
    phrase = PHRASES.get(key)
    if key == "JobService.CreateJob" and not created:
        phrase = "submitted a job to project {name}"
    if phrase:
        text = phrase.format(
            kind=kind or "resource",
            name=name,
            job=parts.get("job", name),
            path=parts["path"],
            replica=parts.get("replica") or "a replica",
        )
    else:
        words = _words(method)
        verb = PAST.get(words[0], words[0].lower() + "ed") if words else "used"
        noun = " ".join(w.lower() for w in words[1:]) or kind
        if noun.endswith("s") and words[0] == "List":
            text = f"{verb} the {noun} of {kind or 'resource'} {name}".strip()
        else:
            text = f"{verb} {noun} {name}".strip()
    return text if granted else f"tried to {_present(text)} (refused)"


# The first word of a sentence, as what a refused caller tried: "cancelled job j" → "cancel job j".
PRESENT = {
    **{past.split()[0]: verb.lower() for verb, past in PAST.items()},
    "read": "read",
    "submitted": "submit",
    "previewed": "preview",
    "made": "make",
    "sent": "send",
    "asked": "ask for",
}


def _present(text: str) -> str:
    first, _, rest = text.partition(" ")
    return f"{PRESENT.get(first, first)} {rest}".strip()
