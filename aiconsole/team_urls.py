"""Console pages of the core: project members and the audit log."""

from django.urls import path

from aiconsole import audit_views, team_views

app_name = "team"

P = "projects/<str:project_id>/"

urlpatterns = [
    path(P + "members/", team_views.members, name="members"),
    path(P + "members/add/", team_views.member_add, name="member_add"),
    path(P + "members/<int:user_id>/role/", team_views.member_role, name="member_role"),
    path(P + "members/<int:user_id>/remove/", team_views.member_remove, name="member_remove"),
    path(P + "members/data-access-logs/", team_views.data_access_logs, name="data_access_logs"),
    path(P + "audit/", audit_views.audit_log, name="audit"),
    path(P + "audit/export/", audit_views.audit_export, name="audit_export"),
    path(P + "audit/<int:entry_id>/", audit_views.audit_entry, name="audit_entry"),
    path("audit/", audit_views.audit_log, name="audit_all"),
    path("audit/export/", audit_views.audit_export, name="audit_all_export"),
    path("audit/<int:entry_id>/", audit_views.audit_entry, name="audit_all_entry"),
]
