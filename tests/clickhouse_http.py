"""ClickHouse's HTTP interface on 127.0.0.1, answered by the ``chdb`` engine: what the store's
:class:`~store.clickhouse.engine.HttpEngine` is tested against where no ClickHouse server can run.

It runs as a process of its own (``python -m tests.clickhouse_http --path DIR``), so that its ``chdb``
session is not the one a test process may hold already (``chdb`` allows one per process). It prints the
port it listens on, then answers until its standard input closes (the starting process ended) or
``--lifetime`` seconds have passed. :func:`clickhouse_http_server` starts and stops it.

What it speaks, as a server does:

- ``GET /ping`` answers ``Ok.``;
- a query in the body (or in the ``query`` argument, the body then following it after a newline),
  answered in its ``FORMAT`` clause's format or ``TabSeparated``, ``{name:Type}`` parameters taken from
  ``param_name`` arguments in ClickHouse's escaped text form, run in the ``database`` argument's
  database;
- ``INSERT INTO table (columns) FORMAT f`` followed by the rows, in any input format;
- a request body compressed as its ``Content-Encoding`` says (zstd, lz4 frame, gzip, deflate), and an
  answer compressed as ``Accept-Encoding`` asks when ``enable_http_compression`` is on, choosing
  among the methods as ClickHouse does (zstd before lz4 before gzip before deflate);
- an engine error as status 500, the exception text as the body and its code in
  ``X-ClickHouse-Exception-Code``.

Other arguments are settings, applied to the request's statement with ``SET`` (and set back for a
request that does not send them); an unknown one is refused, as a server refuses it. Transport
arguments only an HTTP server acts on (``TRANSPORT``) are accepted and not acted on.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import select
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parents[1]

# Arguments that steer the HTTP exchange, not the query: a server acts on them around the query.
TRANSPORT = frozenset(
    {
        "database",
        "query",
        "query_id",
        "session_id",
        "session_timeout",
        "wait_end_of_query",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "cancel_http_readonly_queries_on_client_close",
        "enable_http_compression",
        "default_format",
        "client_protocol_version",  # Native block details; unanswered, as by a proxy that strips it
    }
)
# ClickHouse's preference among the response encodings a client accepts (chooseHTTPCompressionMethod).
RESPONSE_ENCODINGS = ("zstd", "lz4", "gzip", "deflate")
INSERT = re.compile(rb"\s*(INSERT\s+INTO\s+.*?)\s+FORMAT\s+(\w+)[ \t]*\r?\n?", re.IGNORECASE | re.DOTALL)
ERROR_CODE = re.compile(r"Code: (\d+)\.")
UNKNOWN_SETTING, NOT_IMPLEMENTED, STD_EXCEPTION = 115, 48, 1001
MAX_URI = 1 << 20  # ClickHouse's default http_max_uri_size


class RequestError(Exception):
    """A request the double refuses, with the ClickHouse error code a server would give."""

    def __init__(self, code: int, message: str):
        super().__init__(f"Code: {code}. DB::Exception: {message}")


class Answer:
    """The body of a successful answer, its format, and what it read or wrote."""

    def __init__(self, body: bytes, fmt: str, summary: dict[str, str]):
        self.body, self.fmt, self.summary = body, fmt, summary


class ChdbBackend:
    """One ``chdb`` session, one call at a time: the database a request names is selected with
    ``USE`` before its statement, under the same lock."""

    def __init__(self, path: str, database: str):
        from chdb import session

        self._session = session.Session(path)
        self._lock = threading.Lock()
        self._session.query(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        self._current = "default"
        self._applied: dict[str, str] = {}  # settings a request changed from the engine's own
        rows = self._session.query("SELECT name, value FROM system.settings", "JSONCompactEachRow")
        self.settings = dict(json.loads(line) for line in rows.bytes().splitlines())
        self.version, self.timezone = (
            self._session.query("SELECT version(), timezone()", "TSV").bytes().split()
        )
        self.version, self.timezone = self.version.decode(), self.timezone.decode()

    def run(self, args: dict[str, str], body: bytes) -> Answer:
        query = args.get("query", "").encode()
        text = query + b"\n" + body if query and body else query or body
        if not text.strip():
            raise RequestError(NOT_IMPLEMENTED, "Empty query")
        params = {name[len("param_") :]: value for name, value in args.items() if name.startswith("param_")}
        database = args.get("database", "default")
        insert = INSERT.match(text)
        with self._lock:
            if database != self._current:
                self._session.query(f"USE `{database.replace('`', '``')}`")
                self._current = database
            self._apply_settings(args)
            if insert:
                statement, fmt = insert.group(1).decode(), insert.group(2).decode()
                with self._session.send_insert(statement, fmt) as inserter:
                    inserter.append(text[insert.end() :])
                    written = inserter.finish()
                return Answer(b"", fmt, {"written_rows": str(written.rows_written)})
            fmt = args.get("default_format", "TabSeparated")
            result = self._session.query(text.decode(), fmt, params=params)
            summary = {"read_rows": str(result.rows_read()), "read_bytes": str(result.bytes_read())}
            return Answer(result.bytes(), fmt, summary)

    def _apply_settings(self, args: dict[str, str]) -> None:
        """Set the session's settings to those the request sends, and back to the engine's own for
        those it no longer sends (under the lock; ``SET`` only where the value changes)."""
        wanted = {
            name: value
            for name, value in args.items()
            if name not in TRANSPORT and not name.startswith("param_")
        }
        for name in wanted:
            if name not in self.settings:
                raise RequestError(UNKNOWN_SETTING, f"Unknown setting '{name}'")
        for name in sorted(set(self._applied) | set(wanted)):
            value = wanted.get(name, self.settings[name])
            if self._applied.get(name, self.settings[name]) != value:
                quoted = value.replace("\\", "\\\\").replace("'", "\\'")
                self._session.query(f"SET {name} = '{quoted}'")
                self._applied[name] = value


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    # headers and body go out in two writes: without TCP_NODELAY the second waits for the client's
    # delayed acknowledgement, 40 ms a request on Linux, which a server does not add
    disable_nagle_algorithm = True
    server: ClickHouseHttpServer

    def handle_one_request(self) -> None:
        """The base class's, with ClickHouse's limit on the request line (``http_max_uri_size``, 1 MiB)
        instead of 64 KiB: parameters travel in the URL."""
        try:
            self.raw_requestline = self.rfile.readline(MAX_URI + 1)
            if len(self.raw_requestline) > MAX_URI:
                self.requestline, self.request_version, self.command = "", "", ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            if self.command not in ("GET", "POST"):
                self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
                return
            getattr(self, f"do_{self.command}")()
            self.wfile.flush()
        except TimeoutError as exc:
            self.log_error("Request timed out: %r", exc)
            self.close_connection = True

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/ping":
            self._send(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})
        else:
            self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self._body())

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, body: bytes) -> None:
        url = urlsplit(self.path)
        args = dict(parse_qsl(url.query, keep_blank_values=True))
        backend = self.server.backend
        query_id = args.get("query_id") or str(uuid.uuid4())
        headers = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": backend.timezone}
        try:
            if url.path.rstrip("/"):
                raise RequestError(NOT_IMPLEMENTED, f"no handler for {url.path}")
            answer = backend.run(args, decompressed(body, self.headers.get("Content-Encoding", "")))
        except Exception as exc:  # chdb's own error class, or one of this module's
            message = str(exc)
            code = ERROR_CODE.match(message)
            if not code:
                message = f"Code: {STD_EXCEPTION}. DB::Exception: {message}"
            headers["X-ClickHouse-Exception-Code"] = code.group(1) if code else str(STD_EXCEPTION)
            headers["Content-Type"] = "text/plain; charset=UTF-8"
            self._send(500, f"{message} (version {backend.version})\n".encode(), headers)
            return
        headers["X-ClickHouse-Format"] = answer.fmt
        headers["X-ClickHouse-Summary"] = json.dumps(answer.summary)
        headers["Content-Type"] = "application/octet-stream"
        data = answer.body
        compression = args.get("enable_http_compression", backend.settings.get("enable_http_compression"))
        method = response_encoding(self.headers.get("Accept-Encoding", "")) if compression == "1" else ""
        if method and data:
            data = compressed(data, method)
            headers["Content-Encoding"] = method
        self._send(200, data, headers)

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ClickHouseHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, backend: ChdbBackend, *, verbose: bool = False):
        super().__init__(("127.0.0.1", port), Handler)
        self.backend, self.verbose = backend, verbose


def decompressed(body: bytes, encoding: str) -> bytes:
    """A request body as sent before its ``Content-Encoding``."""
    encoding = encoding.strip().lower()
    if not body or encoding in ("", "identity", "none"):
        return body
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.decompress(body)
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise RequestError(NOT_IMPLEMENTED, f"Unknown HTTP Content-Encoding: {encoding}")


def response_encoding(accepted: str) -> str:
    """The encoding ClickHouse would choose from an ``Accept-Encoding`` list ('' for none)."""
    return next((method for method in RESPONSE_ENCODINGS if method in accepted), "")


def compressed(data: bytes, method: str) -> bytes:
    if method == "zstd":
        import zstandard

        return zstandard.compress(data)
    if method == "lz4":
        import lz4.frame

        return lz4.frame.compress(data)
    if method == "gzip":
        return gzip.compress(data)
    return zlib.compress(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="the chdb data directory")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    parser.add_argument(
        "--database", default="jointline", help="created if missing, as a server's image does"
    )
    parser.add_argument("--lifetime", type=float, default=3600.0, help="seconds before it stops by itself")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = parser.parse_args(argv)
    server = ClickHouseHttpServer(args.port, ChdbBackend(args.path, args.database), verbose=args.verbose)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    deadline = time.monotonic() + args.lifetime
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sys.stdin], [], [], remaining)
        if readable and not sys.stdin.buffer.read1(65536):
            break  # whoever started it has gone
    server.shutdown()


@contextmanager
def clickhouse_http_server(path: Path, *, database: str = "jointline", start_s: float = 60) -> Iterator[str]:
    """The double over the chdb data directory ``path``, in a process of its own; yields its URL
    (``http://127.0.0.1:PORT/database``) and stops it on the way out."""
    path.mkdir(parents=True, exist_ok=True)
    log = path.with_name(path.name + ".log")
    command = [sys.executable, "-m", "tests.clickhouse_http", "--path", str(path), "--database", database]
    with log.open("ab") as stderr:
        process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
    try:
        readable, _, _ = select.select([process.stdout], [], [], start_s)
        line = process.stdout.readline() if readable else b""
        if not line.strip().isdigit():
            raise RuntimeError(f"the ClickHouse HTTP double did not start: {log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{int(line)}/{database}"
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


if __name__ == "__main__":
    main()
