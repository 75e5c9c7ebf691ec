"""Vertex AI's model, endpoint and prediction paths, included by ``console.urls`` ahead of
``jobs.vertex.api_urls`` (whose last route answers UNIMPLEMENTED for what neither serves)."""

from django.urls import re_path

from models_registry.vertex import api

L = r"^projects/(?P<project_id>[^/:]+)/locations/(?P<location>[^/:]+)"
MODEL = L + r"/models/(?P<model_id>[^/:]+)"
ENDPOINT = L + r"/endpoints/(?P<endpoint_id>[0-9]+)"

urlpatterns = [
    re_path(L + r"/models:upload$", api.models_upload, name="api-vertex-models-upload"),
    re_path(L + r"/models$", api.models_collection, name="api-vertex-models"),
    re_path(MODEL + r":listVersions$", api.model_versions, name="api-vertex-model-versions"),
    re_path(MODEL + r"$", api.model_item, name="api-vertex-model"),
    re_path(L + r"/endpoints$", api.endpoints_collection, name="api-vertex-endpoints"),
    re_path(ENDPOINT + r":deployModel$", api.endpoint_deploy, name="api-vertex-endpoint-deploy"),
    re_path(ENDPOINT + r":undeployModel$", api.endpoint_undeploy, name="api-vertex-endpoint-undeploy"),
    re_path(ENDPOINT + r":predict$", api.endpoint_predict, name="api-vertex-endpoint-predict"),
    re_path(ENDPOINT + r":rawPredict$", api.endpoint_predict, {"raw": True}, name="api-vertex-endpoint-raw-predict"),
    re_path(ENDPOINT + r"$", api.endpoint_item, name="api-vertex-endpoint"),
]
