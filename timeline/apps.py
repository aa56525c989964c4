from django.apps import AppConfig


class TimelineConfig(AppConfig):
    name = "timeline"

    def ready(self) -> None:
        from orgs.access import read_series_with

        read_series_with(GrantedSeries())


class GrantedSeries:
    """The series rows the gate's aggregate grants select (``orgs.access.SeriesReader``). The gate
    decides per series what those grants allow and may not import the store's models (orgs imports no
    timeline), so it reads the rows of its own grants' WHERE clauses through here."""

    def extent(self, where):
        from django.db.models import Count, Max

        from timeline.models import Series

        rows = Series.unscoped.filter(where)
        found = rows.aggregate(n=Count("pk"), top=Max("pk"), latest=Max("created_at"))
        return found["n"], found["top"] or 0, found["latest"]

    def rows(self, where):
        from timeline.models import Series

        return Series.unscoped.filter(where).values_list("pk", "metric", "labels")
