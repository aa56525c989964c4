from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from ingest import api as ingest_api
from timeline import api as timeline_api

api_v1 = [
    path("push", ingest_api.NativePushView.as_view(), name="push"),
    path("batches/<uuid:batch_id>", ingest_api.BatchStatusView.as_view(), name="batch-status"),
    path("series", timeline_api.SeriesListView.as_view(), name="series"),
    path("lanes", timeline_api.LanesView.as_view(), name="lanes"),
    path("events", timeline_api.EventsView.as_view(), name="events"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
]

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="timeline:page", permanent=False)),
    path("login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("timeline/", include("timeline.urls")),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("admin/", admin.site.urls),
]
