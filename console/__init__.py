"""The project: what puts the apps together. URL routes, WebSocket routes, the ASGI application and
the `aiconsole` command. It imports every app; no app imports it (ARCHITECTURE.md)."""
