"""``{% tensorboard_url job as url %}``: the job's TensorBoard page, or "" when it has no event files."""

from django import template
from django.urls import reverse

from jobs.metrics.logdirs import has_event_files

register = template.Library()


@register.simple_tag
def tensorboard_url(job) -> str:
    if not job.training_input or not has_event_files(job):
        return ""
    return reverse("jobs:tensorboard", args=[job.project.project_id, job.job_id, ""])
