"""One byte form of a JSON document, for hashing and comparing what was stored."""

from __future__ import annotations

import json


def canonical_json(content: dict) -> bytes:
    """``content`` as UTF-8 JSON with sorted keys and no spaces; values JSON cannot hold as text."""
    return json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()
