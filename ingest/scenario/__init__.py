"""The deterministic reference scenario: five organisations' telemetry around the init slowdown.

``generate(ScenarioConfig())`` is the full profile (24 h, 15 s scrapes, per-GPU
series); ``ScenarioConfig.compact()`` the quickstart one. ``scenario.batches()``
yields ``(org slug, Batch)``; ``scenario.manifest`` is the ground truth, written
with :func:`manifest_json`; ``ScenarioConfig(cause=...)`` picks the incident's root cause
(:data:`CAUSES`, :func:`cause_truth`). Pure Python and numpy: no Django here.
"""

from ingest.scenario.causes import cause_truth
from ingest.scenario.config import ALL_EPISODES, CAUSES, EPISODE_ORDER, REFERENCE_CAUSE, ScenarioConfig
from ingest.scenario.scenario import ORG_ORDER, Scenario, generate, manifest_json

__all__ = [
    "ALL_EPISODES",
    "CAUSES",
    "EPISODE_ORDER",
    "ORG_ORDER",
    "REFERENCE_CAUSE",
    "Scenario",
    "ScenarioConfig",
    "cause_truth",
    "generate",
    "manifest_json",
]
