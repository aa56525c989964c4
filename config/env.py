"""Typed readers for settings that come from environment variables.

Each reader fails loudly on a value it cannot parse, naming the variable, so a
typo in a deployment stops the process at start-up instead of running with a
silent default. ``NAME_FILE`` is read instead of ``NAME`` when set (Docker and
Kubernetes secrets).
"""

from __future__ import annotations

import os
from pathlib import Path


class SettingError(RuntimeError):
    pass


def env_str(name: str, default: str | None = None) -> str | None:
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise SettingError(f"{name}_FILE={file_path!r} cannot be read: {exc.strerror}") from exc
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = env_str(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise SettingError(f"{name}={value!r} is not a boolean; use true or false")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = env_str(name)
    if value is None:
        return default
    try:
        number = int(value.replace("_", ""))
    except ValueError as exc:
        raise SettingError(f"{name}={value!r} is not an integer") from exc
    if minimum is not None and number < minimum:
        raise SettingError(f"{name}={number} is below its minimum of {minimum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = env_str(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError as exc:
        raise SettingError(f"{name}={value!r} is not a number") from exc
    if minimum is not None and number < minimum:
        raise SettingError(f"{name}={number} is below its minimum of {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]
