"""Routes of root-cause analysis: its API under ``/api/v1/analysis/`` and its page."""

from django.urls import path

from timeline.analysis import api

urlpatterns = [
    path("api/v1/analysis/changes", api.WhatChangedView.as_view(), name="analysis-changes"),
    path("api/v1/analysis/onsets", api.OnsetsView.as_view(), name="analysis-onsets"),
    path("api/v1/analysis/selection", api.SelectionView.as_view(), name="analysis-selection"),
    path("api/v1/analysis/lag", api.LagView.as_view(), name="analysis-lag"),
    path("analysis/changes/", api.WhatChangedPage.as_view(), name="analysis-changes-page"),
]
