"""Metrics: hypertune reports and TF summaries read while jobs run, stored as points; their
charts, the compare page, and TensorBoard."""
