"""The agent wire protocols, at the paths their clients expect: include at the site root."""

from django.urls import path

from ingest import api_protocols

urlpatterns = [
    path("api/v1/write", api_protocols.RemoteWriteView.as_view(), name="remote-write"),
    path("v1/metrics", api_protocols.OtlpMetricsView.as_view(), name="otlp-metrics"),
    path("v1/logs", api_protocols.OtlpLogsView.as_view(), name="otlp-logs"),
    path("api/v1/otlp/v1/metrics", api_protocols.OtlpMetricsView.as_view(), name="otlp-metrics-prefixed"),
    path("api/v1/otlp/v1/logs", api_protocols.OtlpLogsView.as_view(), name="otlp-logs-prefixed"),
    path("loki/api/v1/push", api_protocols.LokiPushView.as_view(), name="loki-push"),
    path("api/v1/import", api_protocols.ImportView.as_view(), name="import"),
]
