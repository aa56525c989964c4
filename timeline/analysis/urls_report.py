"""Routes of the report analyses: their API under ``/api/v1/analyses/`` and their pages."""

from django.urls import path

from timeline.analysis import api_report

urlpatterns = [
    path("api/v1/analyses/recovery", api_report.RecoveryView.as_view(), name="analyses-recovery"),
    path("api/v1/analyses/checkpoints", api_report.CheckpointPathView.as_view(), name="analyses-checkpoints"),
    path("api/v1/analyses/detections", api_report.DetectionsView.as_view(), name="analyses-detections"),
    path("analyses/recovery/", api_report.RecoveryPage.as_view(), name="analyses-recovery-page"),
    path("analyses/detections/", api_report.DetectionPage.as_view(), name="analyses-detections-page"),
    path("analyses/checkpoints/", api_report.CheckpointPage.as_view(), name="analyses-checkpoints-page"),
]
