from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from aiconsole import oauth_views, openapi, profile_views, user_views
from jobs.api import openapi as jobs_openapi
from jobs.api import views as job_api
from jobs.vertex import api_urls as vertex_urls
from jobs.web import views as job_views
from jobs.web import workers as worker_views
from models_registry import openapi as models_openapi

# Each app describes its own REST paths; the project serves them as one document.
API_DESCRIPTIONS = (jobs_openapi.DESCRIPTION, models_openapi.DESCRIPTION)

urlpatterns = [
    path("", job_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("profile/", profile_views.profile, name="profile"),
    path("workers/", worker_views.workers, name="workers"),
    path("runtimes/", worker_views.runtime_versions, name="runtimes"),
    path("profile/tokens/", profile_views.token_create, name="token_create"),
    path("profile/tokens/<int:token_id>/revoke/", profile_views.token_revoke, name="token_revoke"),
    path("profile/password/", profile_views.password_change, name="password_change"),
    path("users/", user_views.users, name="users"),
    path("users/<str:username>/", user_views.user_detail, name="user_detail"),
    path("users/<str:username>/password/", user_views.user_password, name="user_password"),
    path("users/<str:username>/link/", user_views.user_link, name="user_link"),
    path("users/<str:username>/deactivate/", user_views.user_deactivate, name="user_deactivate"),
    path("users/<str:username>/reactivate/", user_views.user_reactivate, name="user_reactivate"),
    path("users/<str:username>/admin/", user_views.user_admin, name="user_admin"),
    path("set-password/<str:uid>/<str:token>/", user_views.password_link, name="password_link"),
    path("oauth2/token", oauth_views.token, name="oauth2_token"),  # service-account key files' token_uri
    path("v1/", include("aiconsole.api_urls")),
    path("v1/", include("models_registry.vertex.api_urls")),  # before jobs': its last route refuses the rest
    path("v1/", include("jobs.api_urls")),
    path("ui/", include(vertex_urls.ui_urlpatterns)),
    path("v1/", include("models_registry.api_urls")),
    path("upload/v1/projects/<str:project_id>/packages", job_api.package_upload, name="api-package-upload"),
    path("v1/openapi.json", openapi.document_view(*API_DESCRIPTIONS), name="openapi"),
    re_path(r"^(?:upload/)?v1/", job_api.api_not_found),
    path("", include("aiconsole.team_urls")),
    path("", include("models_registry.urls")),
    path("", include("jobs.urls")),
]
