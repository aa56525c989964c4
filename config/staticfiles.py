"""Static files: content-hashed names (cache-busting) and gzip copies, served by WhiteNoise.

``collectstatic`` (run by the Docker image at build time and by ``quickstart`` at every start) writes
into ``STATIC_ROOT`` every file under a name carrying a hash of its content
(``vendor/plotly-jointline/plotly-jointline.min.<hash>.js``), a ``.gz`` copy of each (gzip level 9,
written once at collection, never per request), and ``staticfiles.json`` mapping plain names to
hashed ones. Then:

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

Plotly.js is a build of plotly.js with only the trace types the pages draw, vendored under
``warroom/static/vendor/plotly-jointline/`` with its licence; its recipe is in ``docker/plotly-bundle/``
(docs/decisions/0067-plotly-bundle-of-our-traces.md).
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


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
