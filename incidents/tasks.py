"""Tasks of incidents, registered with the worker through this module (autodiscovery imports each
app's ``tasks``)."""

from incidents.investigation_tasks import investigate_incident

__all__ = ["investigate_incident"]
