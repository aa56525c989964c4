"""The site's URLs plus the agent wire protocols, for tests until config/urls.py includes them."""

from django.urls import include, path

from config.urls import urlpatterns as site_urlpatterns

urlpatterns = [*site_urlpatterns, path("", include("ingest.urls_protocols"))]
