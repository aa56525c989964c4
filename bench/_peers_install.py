"""The peers' programs for ``bench/peers.py``: found on PATH, or fetched from Debian's packages without root.

Each peer comes from one Debian package: ``prometheus`` (``prometheus`` and ``promtool``) and
``victoria-metrics`` (``victoria-metrics``). For each package, in this order:

1. its programs on PATH, unless the caller ignores PATH (``bench/peers.py --fetch-peers``);
2. its programs already unpacked in the cache folder (``--peers-dir``, default
   ``$XDG_CACHE_HOME/jointline-bench/peers``, i.e. ``~/.cache/jointline-bench/peers``), at
   ``<folder>/<package>/usr/bin/<program>``;
3. ``apt-get download <package>`` into ``<folder>/debs`` (no root needed) and ``dpkg-deb -x`` of it
   into ``<folder>/<package>``. When apt's own package lists do not know the package (never updated,
   as on a fresh machine), they are fetched once into ``<folder>/apt`` (``apt-get update`` with its
   lists and cache there, again without root) and the download is tried with those.

A program found or unpacked is run once (``--version``) before it is used. What cannot be found or
fetched is returned with each step's reason; :func:`missing_text` says how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

# Debian's package -> the programs of it the benchmark runs.
PACKAGES: dict[str, tuple[str, ...]] = {
    "prometheus": ("prometheus", "promtool"),
    "victoria-metrics": ("victoria-metrics",),
}
# How each program prints its version (and so shows it runs).
VERSION_FLAG = {"prometheus": "--version", "promtool": "--version", "victoria-metrics": "-version"}
APT_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 30.0


def missing_text(reasons: dict[str, str]) -> str:
    """What is missing, why, and how to install it, from :func:`find`'s reasons."""
    return "; ".join(
        f"{package} ({' and '.join(PACKAGES[package])}) missing: {why}; install it with "
        f"`apt-get install {package}` (or put its programs on PATH)"
        for package, why in reasons.items()
    )


def default_directory() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "jointline-bench" / "peers"


def runs(program: Path | str) -> str | None:
    """The first line ``program`` prints for its version (Debian's victoria-metrics prints none), or
    None if it does not run."""
    try:
        result = subprocess.run(
            [str(program), VERSION_FLAG[Path(program).name]],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        return None
    return output.splitlines()[0] if output else "runs, prints no version"


def _apt(args: list[str], cwd: Path, options: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["apt-get", "-q", *options, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=APT_TIMEOUT_S,
        check=False,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
    )


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {result.returncode}"


def _private_lists(directory: Path) -> list[str]:
    """apt options that keep its package lists and caches in ``directory`` (writable without root)."""
    lists, cache = directory / "lists", directory / "cache"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    (cache / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    return [
        "-o", f"Dir::State::Lists={lists}", "-o", f"Dir::Cache={cache}",
        "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=", "-o", "Debug::NoLocking=1",
    ]  # fmt: skip


def download(package: str, directory: Path, log: Callable[[str], None]) -> Path:
    """``apt-get download package`` into ``directory/debs``; the .deb's path. Raises RuntimeError."""
    if shutil.which("apt-get") is None:
        raise RuntimeError("no apt-get on this machine to fetch it with")
    debs = directory / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for stale in debs.glob(f"{package}_*.deb"):
        stale.unlink()
    log(f"peers: fetching Debian's {package} (apt-get download) into {debs}")
    result = _apt(["download", package], debs, [])
    if result.returncode != 0:
        first = _last_line(result)
        log(f"peers: apt-get download {package}: {first}; updating apt's lists in {directory / 'apt'}")
        options = _private_lists(directory / "apt")
        update = _apt(["update"], debs, options)
        if update.returncode != 0:
            raise RuntimeError(
                f"apt-get download failed ({first}), and so did apt-get update ({_last_line(update)})"
            )
        result = _apt(["download", package], debs, options)
        if result.returncode != 0:
            raise RuntimeError(f"apt-get download failed: {_last_line(result)}")
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        raise RuntimeError(f"apt-get download left no {package}_*.deb in {debs}")
    return found[-1]


def unpack(deb: Path, target: Path) -> None:
    if shutil.which("dpkg-deb") is None:
        raise RuntimeError(f"no dpkg-deb on this machine to unpack {deb.name} with")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    result = subprocess.run(
        ["dpkg-deb", "-x", str(deb), str(target)],
        capture_output=True,
        text=True,
        timeout=APT_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"dpkg-deb -x {deb.name}: {_last_line(result)}")


def _unpacked(package: str, directory: Path) -> dict[str, Path] | None:
    programs = {name: directory / package / "usr" / "bin" / name for name in PACKAGES[package]}
    if all(path.is_file() and runs(path) for path in programs.values()):
        return programs
    return None


def find(
    packages: list[str],
    *,
    directory: Path | None = None,
    use_path: bool = True,
    log: Callable[[str], None] = print,
) -> tuple[dict[str, Path], dict[str, str]]:
    """(program name -> the path to run it from, package -> why it is missing) over ``packages``:
    every program of a package is found, or the package is missing."""
    directory = (directory or default_directory()).expanduser().resolve()
    found: dict[str, Path] = {}
    reasons: dict[str, str] = {}
    for package in packages:
        names = PACKAGES[package]
        if use_path:
            on_path = {name: shutil.which(name) for name in names}
            if all(on_path.values()) and all(runs(path) for path in on_path.values()):
                found.update({name: Path(path) for name, path in on_path.items()})
                log(f"peers: {', '.join(map(str, on_path.values()))} (on PATH)")
                continue
        programs = _unpacked(package, directory)
        if programs is None:
            try:
                unpack(download(package, directory, log), directory / package)
            except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
                where = "not on PATH" if use_path else "PATH ignored"
                reasons[package] = f"{where}, not in {directory}, and not fetched: {exc}"
                continue
            programs = _unpacked(package, directory)
            if programs is None:
                reasons[package] = f"unpacked into {directory / package}, but its programs do not run there"
                continue
        for name, path in programs.items():
            log(f"peers: {name} from {path} ({runs(path)})")
        found.update(programs)
    return found, reasons
