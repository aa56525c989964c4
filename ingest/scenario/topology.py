"""The topologies the reference scenario's organisations push: what their inventories know.

* **storage** (its CMDB): every node mounts the training data (``/datasets``) from one NFS service of
  the storage vendor, whose metadata service all of them wait on; the array's own totals
  (``storage_*``) describe that service, not any node.
* **cloudops** (its network inventory): each node's storage NIC is cabled to the top-of-rack switch
  of its rack, which carries the node's storage traffic to that service; each node sits in its rack
  (a cooling loop). Racks of :data:`~ingest.scenario.causes.RACK_NODES` consecutive nodes, named as
  the manifest names a cause's rack (``r01`` for the first).

Pushed as ``POST /api/v1/topology`` documents (:mod:`ingest.protocols.topology`).
"""

from __future__ import annotations

from ingest.scenario.causes import RACK_NODES
from ingest.scenario.config import ScenarioConfig

STORAGE_SERVICE = "storage_service/datasets"
TOPOLOGY_SOURCE = "cmdb"
NETWORK_SOURCE = "network-inventory"
STORAGE_NIC = "ens2f0"


def rack_name(node_index: int) -> str:
    """The rack of the node at ``node_index`` (0-based), as the manifest names a cause's rack."""
    return f"r{node_index // RACK_NODES + 1:02d}"


def scenario_topologies(config: ScenarioConfig | None = None) -> list[tuple[str, dict]]:
    """(organisation slug, topology document) pairs for the scenario of ``config``."""
    config = config or ScenarioConfig()
    nodes = [config.node_name(i) for i in range(config.nodes)]
    storage = {
        "source": TOPOLOGY_SOURCE,
        "signal": "storage",
        "entities": [{"kind": "storage_service", "name": "datasets", "series": ["storage_*"]}],
        "edges": [{"from": f"node/{node}", "to": STORAGE_SERVICE} for node in nodes],
    }
    network_edges = []
    for index, node in enumerate(nodes):
        nic, rack = f"nic/{node}:{STORAGE_NIC}", rack_name(index)
        network_edges += [
            {"from": f"node/{node}", "to": nic},
            {"from": nic, "to": f"switch/tor-{rack}"},
            {"from": f"node/{node}", "to": f"rack/{rack}"},
        ]
    for rack in sorted({rack_name(i) for i in range(config.nodes)}):
        network_edges.append({"from": f"switch/tor-{rack}", "to": STORAGE_SERVICE})
    network = {"source": NETWORK_SOURCE, "signal": "network", "entities": [], "edges": network_edges}
    return [("storage", storage), ("cloudops", network)]
