"""The topology the reference scenario's organisations push: what storage's CMDB knows.

Every node mounts the training data (``/datasets``) from one NFS service of the storage vendor, whose
metadata service all of them wait on; the array's own totals (``storage_*``) describe that service,
not any node. Pushed as ``POST /api/v1/topology`` documents (:mod:`ingest.protocols.topology`).
"""

from __future__ import annotations

from ingest.scenario.config import ScenarioConfig

STORAGE_SERVICE = "storage_service/datasets"
TOPOLOGY_SOURCE = "cmdb"


def scenario_topologies(config: ScenarioConfig | None = None) -> list[tuple[str, dict]]:
    """(organisation slug, topology document) pairs for the scenario of ``config``."""
    config = config or ScenarioConfig()
    edges = [{"from": f"node/{config.node_name(i)}", "to": STORAGE_SERVICE} for i in range(config.nodes)]
    storage = {
        "source": TOPOLOGY_SOURCE,
        "signal": "storage",
        "entities": [{"kind": "storage_service", "name": "datasets", "series": ["storage_*"]}],
        "edges": edges,
    }
    return [("storage", storage)]
