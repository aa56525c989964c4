"""Log templates: the constant part of log lines, so that "loading shard 12/480 took 41 s" and
"loading shard 13/480 took 39 s" count as one kind of line.

Two miners behind one function, :func:`mine_templates`:

* ``mask`` (the default): every token holding a digit, a hex run or a path separator becomes ``<*>``
  (after splitting ``key=value`` pairs); the rest of the line is its template. Deterministic, one pass,
  no state: the same line always gets the same template, whichever lines come with it.
* ``drain``: the Drain algorithm as maintained in ``drain3`` (a fixed-depth parse tree of token
  prefixes, similarity threshold 0.4). It also merges lines whose variable tokens have no digit, at the
  price of order-dependence (a template can widen as lines arrive), and splits lines whose leading
  tokens vary (its tree is keyed by them).

``bench/analysis.py`` measures both on the scenario's logs (lines per second, templates found, and how
often the two group two lines the same way); docs/decisions/0009-what-changed-scoring.md says why
``mask`` is the default.

Contract: the caller passes only messages the viewer may read (bodies hidden by a redacted grant never
reach a miner, so no template can give them away); a miner returns one template id per message, in
order, and the text of each template.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

METHODS: tuple[str, ...] = ("mask", "drain")
WILDCARD = "<*>"
MAX_MESSAGE_CHARS = 500  # a template is made from the first 500 characters of a line
_VARIABLE = re.compile(r"[0-9/\\]|^[0-9a-fA-F]{8,}$")
_SPLIT = re.compile(r"(\s+|=)")


@dataclass(frozen=True)
class Templates:
    """Result of a miner: ``ids[i]`` is the template of message ``i``; ``texts[t]`` the text of ``t``."""

    ids: list[int]
    texts: list[str]


def mask_template(message: str) -> str:
    """The template of one line under the ``mask`` miner."""
    parts = _SPLIT.split(message[:MAX_MESSAGE_CHARS].strip())
    # split() with a group alternates token, separator, token …: only tokens (even places) can vary
    for i in range(0, len(parts), 2):
        if _VARIABLE.search(parts[i]):
            parts[i] = WILDCARD
    return "".join(parts)


def _mine_mask(messages: Sequence[str]) -> Templates:
    index: dict[str, int] = {}
    ids = []
    for message in messages:
        ids.append(index.setdefault(mask_template(message), len(index)))
    return Templates(ids=ids, texts=list(index))


def _mine_drain(messages: Sequence[str]) -> Templates:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.profiling_enabled = False
    config.drain_sim_th = 0.4
    config.drain_depth = 4
    miner = TemplateMiner(config=config)
    clusters = [miner.add_log_message(m[:MAX_MESSAGE_CHARS])["cluster_id"] for m in messages]
    # Templates widen as lines arrive: take each cluster's final text, and number clusters densely.
    final = {c.cluster_id: c.get_template() for c in miner.drain.clusters}
    dense: dict[int, int] = {}
    ids = [dense.setdefault(c, len(dense)) for c in clusters]
    return Templates(ids=ids, texts=[final[c] for c in dense])


def mine_templates(messages: Sequence[str], *, method: str = "mask") -> Templates:
    """Template ids of ``messages`` (one per message, in order) by ``method`` (:data:`METHODS`)."""
    if method == "mask":
        return _mine_mask(messages)
    if method == "drain":
        return _mine_drain(messages)
    raise ValueError(f"template method must be one of {', '.join(METHODS)}, not {method!r}")
