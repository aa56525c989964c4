from django.apps import AppConfig


class PromqlConfig(AppConfig):
    name = "promql"
