from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"

    def ready(self) -> None:
        # The clock's receive-time estimates read the journal through this registration: the read
        # side imports nothing of the ingest write path (an import contract in pyproject.toml).
        from clock.estimation import read_receive_times_with
        from ingest.selectors import push_receive_times

        read_receive_times_with(push_receive_times)
