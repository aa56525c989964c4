"""The site with the clock-correction URLs added, as config/urls.py will have them."""

from django.urls import include, path

from config import urls as site
from timeline.clock import api as alignment_api

clock_api = [
    path("clock/corrections", alignment_api.ClockCorrectionView.as_view(), name="clock-corrections"),
    path("clock/estimates", alignment_api.ClockEstimateView.as_view(), name="clock-estimates"),
    path("clock/ordering", alignment_api.ClockOrderingView.as_view(), name="clock-ordering"),
]

urlpatterns = [
    path("api/v1/", include((clock_api, "clock"))),
    path("clock/", alignment_api.ClockPage.as_view(), name="clock"),
    *site.urlpatterns,
]
