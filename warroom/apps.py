from django.apps import AppConfig


class WarroomConfig(AppConfig):
    name = "warroom"
