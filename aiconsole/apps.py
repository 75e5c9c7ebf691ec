from django.apps import AppConfig


class AiconsoleConfig(AppConfig):
    name = "aiconsole"
    verbose_name = "AI Console core"
