"""Vertex AI's REST paths (``/v1/projects/P/locations/L/…``), included by ``jobs.api_urls``."""

from django.urls import re_path

from jobs.vertex import api

L = r"^projects/(?P<project_id>[^/:]+)/locations/(?P<location>[^/:]+)"
C = L + r"/(?P<collection>customJobs|hyperparameterTuningJobs|trainingPipelines|batchPredictionJobs)"
ITEM = C + r"/(?P<vertex_id>[0-9]+)"

# The SDK's REST clients for models and endpoints poll operations under /ui/ (the first of the two
# paths Google's http rule gives them); console.urls includes these under it.
ui_urlpatterns = [
    re_path(L + r"/operations/(?P<operation_id>[0-9]+)$", api.operation_item, name="api-vertex-ui-operation"),
]

urlpatterns = [
    re_path(C + r"$", api.jobs_collection, name="api-vertex-jobs"),
    re_path(ITEM + r":cancel$", api.job_cancel, name="api-vertex-job-cancel"),
    re_path(ITEM + r"$", api.job_item, name="api-vertex-job"),
    re_path(L + r"/operations/(?P<operation_id>[0-9]+)$", api.operation_item, name="api-vertex-operation"),
    # Anything else of Vertex AI under a location: Google's envelope, saying what is served.
    re_path(L + r"/(?P<rest>[^/:]+)(?:[/:].*)?$", api.not_served, name="api-vertex-not-served"),
]
