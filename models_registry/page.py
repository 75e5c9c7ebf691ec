"""The job page's section of a batch prediction job (``jobs.kinds.JobPage``): its own input (the
model or version, data format, input paths, output path, region, workers) and what it produced
(counts, and its result and error files, each opened or downloaded in the outputs browser)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.urls import reverse

from aiconsole.errors import ServiceError
from jobs import kinds
from jobs.outputs import files
from jobs.vertex import equivalent as vertex_equivalent
from models_registry import batch, conf

FILES_SHOWN = 50  # output files listed in the section; the outputs browser has the rest


def _output_files(request, job) -> tuple[list, str]:
    """The result and error files under the output path (a bounded look), or why there are none."""
    if not job.is_terminal and job.state != "RUNNING":
        return [], ""
    try:
        listing = files.list_folder(job, actor=request.user, limit=FILES_SHOWN, audited=False)
    except ServiceError as error:
        return [], error.message
    args = (job.project.project_id, job.job_id)
    shown = []
    for entry in listing.entries:
        if entry.kind != "file":
            continue
        query = urlencode({"path": entry.path})
        shown.append(
            {
                "entry": entry,
                "errors": entry.name.startswith(("prediction.errors_stats", "errors_")),
                "open_url": f"{reverse('jobs:output_file', args=args)}?{query}",
                "download_url": f"{reverse('jobs:output_download', args=args)}?{query}",
            }
        )
    return shown, ""


def model_source(prediction_input: dict) -> tuple[str, str]:
    """What the job predicts with, in words, and the model's or version's short name."""
    if prediction_input.get("versionName"):
        return "Version", prediction_input["versionName"].split("/models/", 1)[-1].replace("/versions/", " / ")
    if prediction_input.get("modelName"):
        return "Model (its default version)", prediction_input["modelName"].split("/models/", 1)[-1]
    return "Model folder", prediction_input.get("uri", "")


def sections(request, job) -> list[kinds.PageSection]:
    prediction_input = job.prediction_input or {}
    output_files, files_problem = _output_files(request, job)
    source_kind, source = model_source(prediction_input)
    context = {
        "prediction": prediction_input,
        "prediction_output": job.training_output or {},
        "source_kind": source_kind,
        "source": source,
        "output_files": output_files,
        "files_problem": files_problem,
        "prediction_json": json.dumps(prediction_input, indent=2, sort_keys=True),
        "serving_processes": batch.replicas_needed(prediction_input),
        "serving_cap": conf.batch_max_workers(),
        "vertex": vertex_equivalent.for_job(job),  # a Vertex AI BatchPredictionJob: its name and body
    }
    return [
        kinds.PageSection("prediction", "Prediction", "models_registry/_prediction_section.html", "prediction", context)
    ]


def page() -> kinds.JobPage:
    return kinds.JobPage(finished_opens_on=lambda job: "prediction", sections=sections, input_last=False)
