"""AI Console: a self-hosted AI Platform Training & Prediction with a web console."""
