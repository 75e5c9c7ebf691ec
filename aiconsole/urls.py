from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from jobs import views as job_views

urlpatterns = [
    path("", job_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("v1/", include("jobs.api_urls")),
    path("", include("jobs.urls")),
]
