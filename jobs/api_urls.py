from django.urls import path, re_path

from jobs import api

urlpatterns = [
    path("projects/<str:project_id>/jobs", api.jobs_collection, name="api-jobs"),
    re_path(r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/:]+):cancel$", api.job_cancel, name="api-job-cancel"),
    re_path(r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/:]+)$", api.job_item, name="api-job"),
]
