from django.urls import path, re_path

from jobs.builtin import views as builtin_views
from jobs.containers import views as image_views
from jobs.metrics import compare_views
from jobs.metrics import views as metrics_views
from jobs.notifications import views as notification_views
from jobs.outputs import views as output_views
from jobs.tensorboard import views as tensorboard_views
from jobs.usage import views as usage_views
from jobs.web import annotations as annotation_views
from jobs.web import detail, views
from jobs.web import quotas as quota_views
from jobs.web import sharing as sharing_views
from jobs.webaccess import views as shell_views

app_name = "jobs"

urlpatterns = [
    path("projects/<str:project_id>/jobs/", views.job_list, name="list"),
    path("preferences/jobs-list-columns/", views.job_list_columns, name="list_columns"),
    path("projects/<str:project_id>/jobs/new/", views.job_submit, name="submit"),
    path("projects/<str:project_id>/jobs/new/preview/", views.job_submit_preview, name="submit_preview"),
    path("projects/<str:project_id>/jobs/new/builtin/", builtin_views.builtin_submit, name="submit_builtin"),
    path("projects/<str:project_id>/compare/", compare_views.compare_jobs, name="compare"),
    path("projects/<str:project_id>/images/", image_views.image_list, name="images"),
    path("projects/<str:project_id>/images/delete/", image_views.image_delete, name="image_delete"),
    path("projects/<str:project_id>/notifications/", notification_views.notification_rules, name="notifications"),
    path("projects/<str:project_id>/quotas/", quota_views.project_quotas, name="quotas"),
    path(
        "projects/<str:project_id>/notifications/<str:rule_id>/delete/",
        notification_views.notification_rule_delete,
        name="notification_delete",
    ),
    path("projects/<str:project_id>/usage/", usage_views.project_usage, name="usage"),
    path("projects/<str:project_id>/usage/retention/", usage_views.project_retention, name="usage_retention"),
    path("usage/", usage_views.all_usage, name="all_usage"),
    path("projects/<str:project_id>/data/analysis/", builtin_views.data_analysis, name="data_analysis"),
    path("projects/<str:project_id>/jobs/<str:job_id>/", detail.job_detail, name="detail"),
    re_path(
        r"^(?P<console>agent-platform|vertex-ai|ai/platform)/locations/(?P<location>[^/]+)/(?P<kind>[a-z-]+)/"
        r"(?P<vertex_id>[0-9]+)/?$",
        detail.vertex_console_link,
        name="vertex_console_link",
    ),
    path("projects/<str:project_id>/jobs/<str:job_id>/fragments/<slug:name>/", detail.job_fragment, name="fragment"),
    path("projects/<str:project_id>/jobs/<str:job_id>/logs/", detail.job_logs, name="logs"),
    path(
        "projects/<str:project_id>/jobs/<str:job_id>/trials/download/",
        detail.job_trials_download,
        name="trials_download",
    ),
    path("projects/<str:project_id>/jobs/<str:job_id>/logs/download/", detail.job_logs_download, name="logs_download"),
    path("projects/<str:project_id>/jobs/<str:job_id>/cancel/", detail.job_cancel, name="cancel"),
    re_path(
        r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/]+)/shell/(?P<label>[a-z]+-replica-[0-9]+)/$",
        shell_views.shell_page,
        name="shell",
    ),
    path(
        "projects/<str:project_id>/jobs/<str:job_id>/shell-sessions/<int:session_pk>/recording/",
        shell_views.shell_recording,
        name="shell_recording",
    ),
    path("projects/<str:project_id>/jobs/<str:job_id>/labels/", annotation_views.job_labels, name="labels"),
    path("projects/<str:project_id>/jobs/<str:job_id>/note/", annotation_views.job_note, name="note"),
    path("projects/<str:project_id>/jobs/<str:job_id>/sharing/", sharing_views.job_sharing, name="sharing"),
    path("projects/<str:project_id>/jobs/<str:job_id>/sharing/add/", sharing_views.job_sharing_add, name="sharing_add"),
    path(
        "projects/<str:project_id>/jobs/<str:job_id>/sharing/<int:user_id>/remove/",
        sharing_views.job_sharing_remove,
        name="sharing_remove",
    ),
    path("projects/<str:project_id>/jobs/<str:job_id>/outputs/", output_views.job_outputs, name="outputs"),
    path("projects/<str:project_id>/jobs/<str:job_id>/outputs/file/", output_views.job_output_file, name="output_file"),
    path(
        "projects/<str:project_id>/jobs/<str:job_id>/outputs/download/",
        output_views.job_output_download,
        name="output_download",
    ),
    path("projects/<str:project_id>/jobs/<str:job_id>/metrics/", metrics_views.job_metrics, name="metrics"),
    path("projects/<str:project_id>/jobs/<str:job_id>/resources/", metrics_views.job_resources, name="resources"),
    path(
        "projects/<str:project_id>/jobs/<str:job_id>/metrics/download/",
        metrics_views.job_metrics_download,
        name="metrics_download",
    ),
    re_path(
        r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/]+)/tensorboard/trials/(?P<trial_id>[0-9]+)/(?P<path>.*)$",
        tensorboard_views.job_tensorboard,
        name="trial_tensorboard",
    ),
    re_path(
        r"^projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/]+)/tensorboard/(?P<path>.*)$",
        tensorboard_views.job_tensorboard,
        name="tensorboard",
    ),
]
