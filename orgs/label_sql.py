"""The database side of :mod:`core.labels`: a label matcher as a ``Q`` that means what the Python
matcher means, on every engine, without handing a user's pattern to the engine's own regular
expressions as written.

A regular expression is compared through the ``re2`` lookup (``metric__re2=…``,
``labels__node__re2=…``), matched whole with ``.`` matching a newline, as in PromQL:

* PostgreSQL: the pattern rewritten as an ARE of the same meaning (:func:`core.regex_sql.to_postgres`);
* SQLite: a function of the connection that matches with RE2 (Django's ``REGEXP`` uses Python's
  backtracking ``re``, which a pattern such as ``(a*)*b`` stalls);
* ClickHouse (event reads): ``match()``, which is RE2 (``store.clickhouse.event_sql``).

A pattern without an ARE is refused where it is written (:func:`check_sql_pattern`), so every grant
and correction filters the same on every engine.
"""

from __future__ import annotations

from functools import lru_cache

from django.db import DatabaseError, NotSupportedError, connection, transaction
from django.db.models import CharField, Lookup, Q, TextField
from django.db.models.fields.json import KeyTransform, KeyTransformTextLookupMixin

from core.labels import (
    REGEX_OPS,
    Matcher,
    SelectorError,
    check_regex,
    matches_empty,
    parse_matcher,
    regex_fullmatch,
)
from core.regex_sql import Untranslatable, to_postgres

SQLITE_FUNCTION = "jointline_re2_fullmatch"


def anchored(pattern: str) -> str:
    """``pattern`` as an RE2 pattern to search with: whole text, ``.`` matching a newline."""
    return f"(?s)^(?:{pattern})$"


def _sqlite_fullmatch(pattern: str | None, value) -> bool | None:
    if pattern is None or value is None:
        return None
    return regex_fullmatch(pattern, str(value))


def _sqlite_function(connection) -> None:
    """Registers the RE2 function on the connection's current SQLite handle (once per handle)."""
    connection.ensure_connection()
    handle = connection.connection
    if getattr(connection, "_jointline_re2_handle", None) is not handle:
        handle.create_function(SQLITE_FUNCTION, 2, _sqlite_fullmatch, deterministic=True)
        connection._jointline_re2_handle = handle


class Re2Match(Lookup):
    """``field__re2=pattern``: the whole value matches the RE2 ``pattern`` (see the module)."""

    lookup_name = "re2"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        pattern = self.rhs
        if connection.vendor == "postgresql":
            try:
                return f"({lhs})::text ~ %s", [*lhs_params, to_postgres(pattern)]
            except Untranslatable as exc:
                raise NotSupportedError(f"{pattern!r} has no PostgreSQL equivalent: {exc}") from None
        if connection.vendor == "sqlite":
            _sqlite_function(connection)
            return f"{SQLITE_FUNCTION}(%s, {lhs})", [pattern, *lhs_params]
        raise NotSupportedError(f"the re2 lookup is not available on {connection.vendor}")


class KeyTransformRe2Match(KeyTransformTextLookupMixin, Re2Match):
    """``labels__node__re2=pattern``: the label's value as text."""


CharField.register_lookup(Re2Match)
TextField.register_lookup(Re2Match)
KeyTransform.register_lookup(KeyTransformRe2Match)


@lru_cache(maxsize=1024)
def _postgres_refusal(are: str) -> str:
    """Why PostgreSQL refuses to compile ``are`` ("regular expression is too complex"), or ""."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT '' ~ %s", [are])
    except DatabaseError as exc:
        return str(exc).strip() or "refused by PostgreSQL"
    return ""


def sql_refusal(pattern: str) -> str:
    """Why the ``re2`` lookup cannot evaluate ``pattern`` on the database in use ("" if it can): a
    construct with no ARE (Unicode classes such as ``\\p{L}``, word boundaries, multi-line anchors,
    repetitions too large), or an ARE PostgreSQL finds too complex. The reason is the same on every
    engine but the last, which only PostgreSQL can tell."""
    try:
        are = to_postgres(pattern)
    except Untranslatable as exc:
        return str(exc)
    return _postgres_refusal(are) if connection.vendor == "postgresql" else ""


def check_sql_pattern(pattern: str, field_name: str) -> None:
    """Raises :class:`SelectorError` naming ``field_name`` for a pattern RE2 refuses, or one the
    database cannot evaluate as RE2 does (:func:`sql_refusal`): grants and corrections filter in SQL."""
    check_regex(pattern, field_name)
    reason = sql_refusal(pattern)
    if reason:
        raise SelectorError(
            field_name,
            f"{pattern!r} cannot be evaluated by the database ({reason}); write it out in plain terms",
        )


def parse_sql_matcher(text: str, *, field_name: str = "label_matchers") -> Matcher:
    """:func:`core.labels.parse_matcher` for a matcher applied in SQL (a grant's, a correction's):
    also refuses a regex the database cannot evaluate as RE2 does (:func:`check_sql_pattern`)."""
    name, op, value = parse_matcher(text, field_name=field_name)
    if op in REGEX_OPS:
        check_sql_pattern(value, field_name)
    return name, op, value


def label_q(json_field: str, name: str, op: str, value: str) -> Q:
    """One label matcher as a ``Q`` over a JSON field, with the semantics of
    :func:`core.labels.label_matches`: a missing label is the empty string (it satisfies ``node=""``,
    ``node=~".*"`` and ``node!="x"``), regexes are RE2's, whole and with ``.`` matching a newline."""
    has = Q(**{f"{json_field}__has_key": name})
    lookup = "re2" if op in REGEX_OPS else "exact"
    same = Q(**{f"{json_field}__{name}__{lookup}": value})
    # Only rows that hold the label compare its value: a negated comparison with a missing key is NULL
    # in SQL, so "missing" is decided apart, by what the empty string does.
    present = has & same if op in ("=", "=~") else has & ~same
    return present | ~has if matches_empty(op, value) else present


def name_q(field: str, pattern: str) -> Q:
    """``field`` (a metric or event name) matches the RE2 ``pattern`` whole."""
    return Q(**{f"{field}__re2": pattern})
