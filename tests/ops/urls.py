"""The project's URLs plus ops.urls, for tests that run before config/urls.py includes ops.urls."""

from django.urls import include, path

from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("", include("ops.urls")), *project_urlpatterns]
