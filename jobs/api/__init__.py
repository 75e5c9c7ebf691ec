"""The jobs API's REST adapters: ``projects.jobs`` (list, get, create, cancel, patch) and the jobs' IAM policies."""
