from django.urls import path

from timeline import api, views

app_name = "timeline"

urlpatterns = [
    path("", views.TimelinePage.as_view(), name="page"),
    path("api/catalogue", api.WarroomCatalogueView.as_view(), name="catalogue"),
    path("api/lanes", api.WarroomLanesView.as_view(), name="lanes"),
    path("api/events", api.WarroomEventsView.as_view(), name="events"),
]
