"""Routes of the Prometheus-compatible API; mounted under ``/prometheus/`` (Grafana's data source URL
is ``https://<jointline>/prometheus``)."""

from django.urls import path

from timeline.promql import api

app_name = "promql"

urlpatterns = [
    path("api/v1/query", api.QueryView.as_view(), name="query"),
    path("api/v1/query_range", api.QueryRangeView.as_view(), name="query-range"),
    path("api/v1/series", api.SeriesView.as_view(), name="series"),
    path("api/v1/labels", api.LabelsView.as_view(), name="labels"),
    path("api/v1/label/<str:name>/values", api.LabelValuesView.as_view(), name="label-values"),
    path("api/v1/metadata", api.MetadataView.as_view(), name="metadata"),
    path("api/v1/status/buildinfo", api.BuildInfoView.as_view(), name="buildinfo"),
    path("api/v1/rules", api.RulesView.as_view(), name="rules"),
    path("api/v1/query_exemplars", api.ExemplarsView.as_view(), name="exemplars"),
]
