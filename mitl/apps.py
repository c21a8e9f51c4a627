from django.apps import AppConfig


class MitlConfig(AppConfig):
    name = "mitl"
    verbose_name = "Machine in the loop"
