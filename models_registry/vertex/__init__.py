"""Vertex AI's ModelService, EndpointService and PredictionService over the model registry: a
Vertex model is a registry model (its versions are the same versions, served by the same
processes), an endpoint routes each prediction to one of the versions deployed to it."""
