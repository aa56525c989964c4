from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        # Celery signals fire in whichever process runs a task (a worker, or the web process when
        # tasks run eagerly); connecting here covers both.
        from ops import heartbeat, metrics

        metrics.connect_task_signals()
        metrics.connect_journal_signals()
        heartbeat.connect_worker_signals()
