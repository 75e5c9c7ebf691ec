from django.urls import include, path, re_path

from jobs.api import iam as iam_api
from jobs.api import views as api
from jobs.containers import api as image_api
from jobs.logs import api as log_api
from jobs.metrics import api as metrics_api
from jobs.notifications import api as notification_api
from jobs.usage import api as usage_api

P = r"^projects/(?P<project_id>[^/:]+)"
J = P + r"/jobs/(?P<job_id>[^/:]+)"

urlpatterns = [
    path("", include("jobs.vertex.api_urls")),  # Vertex AI's CustomJob and HyperparameterTuningJob
    re_path(r"^projects/-/usage$", usage_api.all_usage, name="api-all-usage"),
    re_path(P + r"/usage$", usage_api.project_usage, name="api-project-usage"),
    re_path(P + r":getConfig$", api.project_config, name="api-project-config"),
    re_path(P + r"/locations$", api.locations_collection, name="api-locations"),
    re_path(P + r"/quotas$", api.project_quotas, name="api-project-quotas"),
    re_path(P + r"/runtimeVersions$", api.runtime_versions, name="api-runtime-versions"),
    re_path(P + r"/locations/(?P<location_id>[^/:]+)$", api.location_item, name="api-location"),
    path("projects/<str:project_id>/jobs", api.jobs_collection, name="api-jobs"),
    re_path(P + r"/notificationRules$", notification_api.rules_collection, name="api-notification-rules"),
    re_path(P + r"/notificationRules/(?P<rule_id>[^/:]+)$", notification_api.rule_item, name="api-notification-rule"),
    re_path(P + r"/images$", image_api.images_collection, name="api-images"),
    re_path(P + r"/images:load$", image_api.image_load, name="api-image-load"),
    re_path(P + r"/images/(?P<name>.+)$", image_api.image_item, name="api-image"),  # names hold / and :
    re_path(J + r":cancel$", api.job_cancel, name="api-job-cancel"),
    re_path(J + r":getIamPolicy$", iam_api.job_get_iam_policy, name="api-job-get-iam-policy"),
    re_path(J + r":setIamPolicy$", iam_api.job_set_iam_policy, name="api-job-set-iam-policy"),
    re_path(J + r":testIamPermissions$", iam_api.job_test_iam_permissions, name="api-job-test-iam-permissions"),
    re_path(r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/:]+)/logs$", log_api.job_logs, name="api-job-logs"),
    re_path(J + r"/metrics$", metrics_api.job_metrics, name="api-job-metrics"),
    re_path(J + r"/trials$", api.job_trials, name="api-job-trials"),
    re_path(J + r"$", api.job_item, name="api-job"),
]
