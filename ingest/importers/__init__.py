"""File import: log files, metric dumps and traces → batches, accepted through the journal like any push.

Formats (``ImportSpec.format``):

``bgl``
    Blue Gene/L RAS log (loghub): ``- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11
    2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO message``.
    Time: the epoch seconds (UTC), plus the microseconds of the local time
    stamp. Node → resource ``node``; ``RAS KERNEL`` → name; INFO, WARNING,
    SEVERE/ERROR, FATAL/FAILURE → info, warning, error, critical; a first field
    other than ``-`` is the alert category (attribute ``alert``).
``hpc``
    LANL HPC events (loghub): ``134681 node-246 unix.hw state_change.unavailable
    1077804742 1 message``. Time: epoch seconds. Component → name; states that
    say unavailable, error or fail are warnings.
``thunderbird``
    Sandia Thunderbird syslog (loghub): ``- 1131566461 2005.11.09 dn228 Nov 9
    12:01:01 dn228/dn228 crond[2916]: message``. Time: epoch seconds; the
    program (without path, ``(pam_unix)`` or pid) → name.
``syslog``
    BSD syslog without a year: ``Jun 14 15:16:01 combo sshd[19939]: message``.
    Needs ``year`` (of the first line; the year goes up when the month goes
    down) and ``timezone``.
``prom``
    Prometheus text exposition with millisecond timestamps, see
    :mod:`ingest.protocols.prom_text` (``default_ts`` for lines without one).
``csv`` / ``jsonl``
    Rows → samples or events by a column ``mapping`` (:func:`parse_mapping`).
``alibaba-pods``
    The Alibaba GPU trace's pod list: each pod becomes scheduler spans,
    ``pod.pending`` from creation to scheduling (to deletion if it never ran;
    omitted when scheduled at once) and ``pod.running`` from scheduling to deletion; the trace's times are
    seconds from an unstated start, so ``origin`` (RFC 3339) is required.

For the log formats, a line that does not match the format continues the
previous entry's message (multi-line entries); such a line before any entry,
and any line the format cannot read, is an error. So is a record the store
cannot hold (:mod:`ingest.protocols.storable`: a NUL character in a node, a
name or a label, a name too long for its column), named by its line and field
(``line 12: resource.node: contains a NUL character ...``); a NUL in a log
message is kept (the store writes it as U+FFFD). Errors reject the whole
file, each named by line number: :func:`accept_import` reads a file twice,
first only to check it, so nothing is stored from a file with an error.

An import is a deliberate backfill: its timestamps may be as old as the file
(loghub's logs are from 2005), so the accept window of a push does not apply.
Its batches still respect the push's day span: records are cut into batches
of at most ``batch_records`` records whose timestamps fall within one window
of ``batch_days`` UTC days (``JOINTLINE_PUSH_MAX_DAYS``, windows aligned on day
numbers, :func:`split_by_days`), so a file spanning 545 days becomes at least
18 journal entries, each creating at most that many day partitions when applied.

Each format has its module (:mod:`.logs`, :mod:`.prom`, :mod:`.alibaba`, :mod:`.mapped` for CSV and
JSONL); :mod:`.reading` turns a file of any of them into checked batches and journals them, and
:mod:`.common` holds the spec and what the formats share.
"""

from ingest.importers.common import (
    BATCH_RECORDS,
    FORMATS,
    LOG_FORMATS,
    ImportFileError,
    ImportSpec,
    ImportSummary,
)
from ingest.importers.mapped import ColumnMapping, parse_mapping
from ingest.importers.reading import accept_import, check_spec, lines_of, read_batches, split_by_days

__all__ = [
    "BATCH_RECORDS",
    "FORMATS",
    "LOG_FORMATS",
    "ColumnMapping",
    "ImportFileError",
    "ImportSpec",
    "ImportSummary",
    "accept_import",
    "check_spec",
    "lines_of",
    "parse_mapping",
    "read_batches",
    "split_by_days",
]
