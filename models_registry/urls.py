from django.urls import path

from models_registry import views

app_name = "models"

P = "projects/<str:project_id>/models/"
M = P + "<str:model>/"
V = M + "versions/<str:version>/"

urlpatterns = [
    path(P, views.model_list, name="list"),
    path(P + "new-model/", views.model_create, name="create"),
    path(P + "deploy-from-job/", views.deploy_from_job, name="deploy"),
    path(P + "batch-prediction/", views.batch_new, name="batch"),
    path(P + "batch-prediction/<str:job_id>/", views.batch_job, name="batch_job"),
    path(M, views.model_detail, name="detail"),
    path(M + "fragments/versions/", views.model_versions, name="versions_fragment"),
    path(M + "delete/", views.model_delete, name="delete"),
    path(M + "predict/", views.try_prediction, name="try_prediction"),
    path(M + "versions/create/", views.version_create, name="version_create"),
    path(M + "sharing/", views.model_sharing, name="sharing"),
    path(M + "sharing/add/", views.model_sharing_add, name="sharing_add"),
    path(M + "sharing/<int:user_id>/remove/", views.model_sharing_remove, name="sharing_remove"),
    path(V, views.version_detail, name="version"),
    path(V + "default/", views.version_set_default, name="version_default"),
    path(V + "delete/", views.version_delete, name="version_delete"),
]
