"""One small adapter over the two ways of reaching ClickHouse: a server over HTTP through
``clickhouse-connect``, and the ``chdb`` engine in-process.

``clickhouse-connect`` has no ``chdb`` transport (0.15: HTTP only), and ``chdb`` speaks no HTTP, so the
store talks to an :class:`Engine` with three calls. Everything above it is shared: the same SQL text
(parameters bound server-side as ``{name:Type}``, which both engines accept), the same ``RowBinary``
bytes in and out (fixed-width columns, decoded by numpy without a per-row Python step).

``JOINTLINE_CLICKHOUSE_URL`` chooses: ``http(s)://user:password@host:8123/database`` for a server,
``chdb:///absolute/path`` for the embedded engine (one per process: ``chdb`` allows a single session).
"""

from __future__ import annotations

import re
import threading
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured


class Engine:
    """A ClickHouse database the store reads and writes. Every call raises on an engine error.

    Parameter values read the same on both engines: a number, a string (any characters), ``None``
    (NULL, for a ``Nullable`` type), and a list or tuple of numbers or strings (an ``Array``)."""

    url: str
    schema_ready = False  # whether this process has made sure the ClickHouse tables exist

    def query(self, sql: str, params: dict | None = None, *, fmt: str = "RowBinary") -> bytes:
        """The rows of ``sql`` as bytes in the output format ``fmt`` (``RowBinary`` for fixed-width
        columns, ``JSONCompactEachRow`` where rows carry text)."""
        raise NotImplementedError

    def command(self, sql: str, params: dict | None = None) -> None:
        """Run a statement that returns no rows (DDL, DELETE)."""
        raise NotImplementedError

    def insert(self, table: str, columns: tuple[str, ...], rows: bytes, *, fmt: str = "RowBinary") -> None:
        """Insert ``rows`` (of ``columns``, in order, in the input format ``fmt``) into ``table``."""
        raise NotImplementedError


class ChdbEngine(Engine):
    """The ``chdb`` engine in this process, its data under ``path``. Calls are serialised: the
    session is one per process and not safe to share between threads."""

    def __init__(self, path: str):
        try:
            from chdb import session
        except ImportError as exc:
            raise ImproperlyConfigured(
                "JOINTLINE_CLICKHOUSE_URL names the embedded chdb engine, but chdb is not installed "
                '(pip install -e ".[clickhouse-embedded]")'
            ) from exc
        self.url = f"chdb://{path}"
        self._session = session.Session(path)
        self._lock = threading.Lock()

    def query(self, sql: str, params: dict | None = None, *, fmt: str = "RowBinary") -> bytes:
        with self._lock:
            return self._session.query(sql, fmt, params=_chdb_params(params)).bytes()

    def command(self, sql: str, params: dict | None = None) -> None:
        with self._lock:
            self._session.query(sql, "RowBinary", params=_chdb_params(params))

    def insert(self, table: str, columns: tuple[str, ...], rows: bytes, *, fmt: str = "RowBinary") -> None:
        with (
            self._lock,
            self._session.send_insert(f"INSERT INTO {table} ({', '.join(columns)})", fmt) as ins,
        ):
            ins.append(rows)
            ins.finish()


def _chdb_params(params: dict | None) -> dict:
    """Parameter values as the text chdb parses them: a string in ClickHouse's escaped form (a tab or a
    backslash taken literally), an array as a literal of quoted elements, ``None`` as ``\\N``. chdb
    passes other values through ``str``, which reads back only for numbers."""
    return {name: _chdb_text(value) for name, value in (params or {}).items()}


def _chdb_text(value: object) -> object:
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return _ESCAPED.sub(lambda m: _ESCAPES[m.group()], value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_chdb_element(item) for item in value) + "]"
    return value


def _chdb_element(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"query parameter arrays hold numbers or strings, not {type(value).__name__}")
    return repr(value)


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"}
_ESCAPED = re.compile("|".join(re.escape(key) for key in _ESCAPES))


class HttpEngine(Engine):
    """A ClickHouse server over HTTP(S) through ``clickhouse-connect``; connecting pings the server,
    so an unreachable one fails here, at the first use of the store."""

    def __init__(self, url: str):
        try:
            import clickhouse_connect
        except ImportError as exc:
            raise ImproperlyConfigured(
                'the ClickHouse store needs clickhouse-connect (pip install -e ".[clickhouse]")'
            ) from exc
        parts = urlsplit(url)
        self.url = f"{parts.scheme}://{parts.hostname}:{parts.port or 8123}{parts.path}"
        try:
            self._client = clickhouse_connect.get_client(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or (8443 if parts.scheme == "https" else 8123),
                username=unquote(parts.username or "default"),
                password=unquote(parts.password or ""),
                database=parts.path.strip("/") or "default",
                secure=parts.scheme == "https",
                autogenerate_session_id=False,
            )
        except Exception as exc:  # the client raises its own OperationalError or a socket error
            raise ImproperlyConfigured(f"ClickHouse at {self.url} is not reachable: {exc}") from exc

    def query(self, sql: str, params: dict | None = None, *, fmt: str = "RowBinary") -> bytes:
        return self._client.raw_query(sql, parameters=_http_params(params), fmt=fmt)

    def command(self, sql: str, params: dict | None = None) -> None:
        self._client.command(sql, parameters=_http_params(params))

    def insert(self, table: str, columns: tuple[str, ...], rows: bytes, *, fmt: str = "RowBinary") -> None:
        self._client.raw_insert(table, list(columns), insert_block=rows, fmt=fmt)


def _http_params(params: dict | None) -> dict:
    """Parameter values as clickhouse-connect sends them (``param_name`` URL arguments in ClickHouse's
    escaped form), with a tuple sent as the array it is on chdb: the client would write ``(a, b)``,
    which the server does not parse as an ``Array``."""
    return {
        name: list(value) if isinstance(value, tuple) else value for name, value in (params or {}).items()
    }


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(url: str) -> Engine:
    """The process's engine for ``url`` (made on first use, then shared)."""
    with _engines_lock:
        if url not in _engines:
            scheme = urlsplit(url).scheme
            if scheme == "chdb":
                path = url.split("://", 1)[1]
                if not path.startswith("/"):
                    raise ImproperlyConfigured(
                        f"JOINTLINE_CLICKHOUSE_URL={url!r}: chdb needs an absolute path"
                    )
                _engines[url] = ChdbEngine(path)
            elif scheme in ("http", "https"):
                _engines[url] = HttpEngine(url)
            else:
                raise ImproperlyConfigured(
                    f"JOINTLINE_CLICKHOUSE_URL={url!r}: use http(s)://host:port/database or chdb:///path"
                )
        return _engines[url]
