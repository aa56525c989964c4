"""Static files: content-hashed names (cache-busting) and gzip copies, served by WhiteNoise.

``collectstatic`` (run by the Docker image at build time and by ``quickstart`` at every start) writes
into ``STATIC_ROOT`` every file under a name carrying a hash of its content
(``vendor/plotly/plotly.min.<hash>.js``), a ``.gz`` copy of each (gzip level 9, written once at
collection, never per request), and ``staticfiles.json`` mapping plain names to hashed ones. Then:

* ``{% static %}`` links the hashed name, which WhiteNoise serves with ``Cache-Control: max-age=315360000,
  public, immutable``, gzip-encoded to a client that accepts gzip (``Vary: Accept-Encoding``). A new
  release changes the names of exactly the files that changed.
* The war room's ES modules import each other by relative name (``import ... from "./format.js"``):
  those imports are rewritten to the hashed names too, so a changed module changes the hash of every
  module that imports it, and no browser mixes modules of two releases.
* With a manifest, a template naming a file that was not collected is an error (Django's strict
  manifest), as in production.

Before any ``collectstatic`` (a development checkout, the test suite) there is no manifest:
``{% static %}`` links the plain names, which WhiteNoise serves from the apps' static folders
(``WHITENOISE_USE_FINDERS``), uncompressed and cached for 60 s. After editing a static file on a
collected installation, collect again (``quickstart`` does).

Only ``plotly.min.js`` of the plotly package's data folder is collected: its datasets, themes and the
Jupyter widget bundle (5 MB) are never served.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.staticfiles.finders import FileSystemFinder
from django.core.files.storage import Storage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticDirsFinder(FileSystemFinder):
    """Django's finder of ``STATICFILES_DIRS``, leaving the plotly package's unused data out of listings.

    Listings are what ``collectstatic`` copies and what WhiteNoise serves from the finders."""

    # Names inside plotly's package_data/, which STATICFILES_DIRS mounts whole as vendor/plotly/.
    unlisted = ("widgetbundle.js", "datasets", "templates")

    def list(self, ignore_patterns: list[str] | None) -> Iterator[tuple[str, Storage]]:
        return super().list([*(ignore_patterns or ()), *self.unlisted])


class HashedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's hashed and compressed storage, with module imports hashed and a manifest-less mode.

    ``url(name)`` is the hashed URL when a manifest has been collected (missing names raise
    ``ValueError``), the plain URL when none has.
    """

    support_js_module_import_aggregation = True

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name
        return super().stored_name(name)
