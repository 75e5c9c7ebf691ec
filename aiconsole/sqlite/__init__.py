"""The embedded database: Django's SQLite backend, with its open connections kept for reuse."""
