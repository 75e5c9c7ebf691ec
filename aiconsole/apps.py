from django.apps import AppConfig


class AiconsoleConfig(AppConfig):
    name = "aiconsole"
    verbose_name = "AI Console core"

    def ready(self):
        from aiconsole import signin  # noqa: F401 (connects the failed sign-in audit)
