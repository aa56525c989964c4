from django.apps import AppConfig


class TimelineConfig(AppConfig):
    name = "timeline"

    def ready(self) -> None:
        from orgs.access import read_series_with
        from timeline.models import Series

        # The gate decides per series what aggregate grants allow and may not import the store's models
        # (orgs imports no timeline): it reads the rows its own grants' WHERE clauses select through here.
        read_series_with(
            lambda where: Series.unscoped.filter(where).only("pk", "org_id", "signal", "metric", "labels")  # noqa: TID251
        )
