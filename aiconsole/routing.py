"""WebSocket routes; the live-log consumers are added by the live-logs feature."""

websocket_urlpatterns: list = []
