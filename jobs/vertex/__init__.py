"""Vertex AI's training API (CustomJob, HyperparameterTuningJob) on the same engine: the schema and
the translation of its bodies (pure), what its replicas get (``launch``), its services, REST
adapters and the job page's Vertex forms."""
