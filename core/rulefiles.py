"""Rules kept as data: a JSON file shipped beside the code, and a deployment's file that replaces
some of its sections.

A rules file holds a JSON object of known sections. The deployment's file (named by a setting) may
hold any of them; each section it holds replaces the shipped one whole, the others stay. Both files
are read again when one changes (path and modification time). A file that cannot be read, is not an
object or holds an unknown section raises the caller's error class, naming the file and the reason;
the field checkers below do the same for one field, so every message reads ``file: field: reason``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class RulesFileError(ValueError):
    """A rules file that cannot be used; the message names the file, the field and the reason."""


def rules_in_force(
    shipped: Path,
    override: str | os.PathLike | None,
    sections: tuple[str, ...],
    *,
    build: Callable[[dict, Fields], T],
    error: type[RulesFileError],
) -> T:
    """``build(document, check)`` of the merged document of ``shipped`` and ``override`` (when set),
    once it holds every section; ``check`` names the file in its messages (the override's when there
    is one). Built again only when a file changes."""
    files = [Path(shipped), Path(override)] if override else [Path(shipped)]
    versions = []
    for file in files:
        try:
            versions.append((str(file), os.stat(file).st_mtime_ns))
        except OSError as exc:
            raise error(f"rules file {str(file)!r} cannot be read: {exc}") from None
    return _built(tuple(versions), sections, build, error)


@lru_cache(maxsize=16)
def _built(versions: tuple[tuple[str, int], ...], sections: tuple[str, ...], build, error):
    document: dict = {}
    for path, _ in versions:
        document.update(read_sections(path, sections, error=error))
    check = Fields(versions[-1][0], error)
    check.sections(document, sections)
    return build(document, check)


def read_sections(path: str | os.PathLike, sections: tuple[str, ...], *, error: type[RulesFileError]) -> dict:
    """The sections of one rules file, checked to be known (their contents are checked by the caller)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"rules file {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(document, dict):
        raise error(f"{path}: must hold a JSON object with sections {', '.join(sections)}")
    unknown = sorted(set(document) - set(sections))
    if unknown:
        raise error(f"{path}: {unknown[0]}: unknown section; known: {', '.join(sections)}")
    return document


class Fields:
    """Checks of the fields of one document: each failure raises ``error`` as
    ``where: field: reason``."""

    def __init__(self, where: str, error: type[RulesFileError]):
        self.where = where
        self.error = error

    def fail(self, name: str, reason: str) -> RulesFileError:
        return self.error(f"{self.where}: {name}: {reason}")

    def sections(self, document: dict, sections: tuple[str, ...]) -> None:
        missing = [name for name in sections if name not in document]
        if missing:
            raise self.fail(missing[0], "missing")

    def items(self, value, name: str) -> list:
        if not isinstance(value, list):
            raise self.fail(name, "must be a list")
        return value

    def names(self, value, name: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, "must be a list of names")
        return tuple(value)

    def text_map(self, value, name: str) -> dict[str, str]:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(name, "must be an object of names to text")
        return dict(value)

    def pattern(self, value, name: str) -> re.Pattern:
        if not isinstance(value, str):
            raise self.fail(name, "must be a regular expression (text)")
        try:
            return re.compile(value)
        except re.error as exc:
            raise self.fail(name, f"not a regular expression: {exc}") from None

    def object(self, item, name: str, keys: tuple[str, ...], required: tuple[str, ...]) -> dict:
        """``item`` checked to be an object holding every key of ``required`` and none outside ``keys``."""
        if not isinstance(item, dict):
            raise self.fail(name, "must be an object")
        unknown = sorted(set(item) - set(keys))
        if unknown:
            raise self.fail(f"{name}.{unknown[0]}", f"unknown key; known: {', '.join(keys)}")
        missing = [key for key in required if key not in item]
        if missing:
            raise self.fail(f"{name}.{missing[0]}", "missing")
        return item
