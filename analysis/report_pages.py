"""What the report analyses' pages show: their window, and their figures as text linked to the events.

A page shows ``from``/``to`` when given, else the day up to the latest readable event of interest; its
charts read the API over the same window as the same viewer. Times are written to the second in UTC,
shares as percentages; a figure the viewer cannot read is an en dash. Each figure links to a list of
the events behind it, and each event to the war room around it.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from clock.model import read_hints
from core.timeparse import format_rfc3339, parse_timestamp
from orgs.access import Scope
from store import EventMatch, get_store
from timeline import api_shapes
from timeline.selectors import QueryError, Window

DAY_US = 86_400_000_000


def latest_signal_us(scope: Scope, signal: str, names: list[str]) -> int | None:
    """The (stored) time of the latest readable event of ``signal`` named in ``names``, or None."""
    latest = get_store().first_event(
        scope,
        read_hints(scope, start=0, end=2**62),
        match=EventMatch(signals=(signal,), names=tuple(names)),
        order="latest",
    )
    return None if latest is None else latest.ts


def window_json(window: Window | None) -> dict | None:
    return window and api_shapes.window_bounds(window)


UNKNOWN = "\u2013"  # an en dash: a figure the viewer cannot read


def utc_seconds(stamp: str) -> str:
    """An RFC 3339 time as a page shows it: to the second, in UTC (``2026-06-15 04:43:59 UTC``)."""
    return format_rfc3339(parse_timestamp(stamp))[:19].replace("T", " ") + " UTC"


def percent_text(value: float | None, digits: int = 1) -> str:
    """A 0-1 share as a percentage with its unit (``6.5 %``); :data:`UNKNOWN` when unknown."""
    return UNKNOWN if value is None else f"{100 * value:.{digits}f} %"


def percent_range(pair: list[float] | None) -> str:
    return UNKNOWN if not pair else f"{percent_text(pair[0])} {UNKNOWN} {percent_text(pair[1])}"


def chart_source(api_name: str, window: Window | None, **extra) -> str:
    """The API address a page's charts read (the same window, the same viewer)."""
    if window is None:
        return ""
    return f"{reverse(api_name)}?{urlencode({**api_shapes.window_bounds(window), **extra})}"


def page_window(scope: Scope, params, *, signal: str, names: list[str]) -> tuple[Window | None, str]:
    """The window a page shows: ``from``/``to`` when given, else the day up to the latest readable
    event of interest; and an error to show when the parameters cannot be read."""
    if params.get("from") or params.get("to"):
        try:
            return Window.from_params(params), ""
        except QueryError as exc:
            return None, str(exc)
    latest = latest_signal_us(scope, signal, names)
    if latest is None:
        return None, ""
    return Window(latest + 1 - DAY_US, latest + 1), ""


def warroom_query(ts_us: int, *, half_span_us: int = 30 * 60_000_000) -> str:
    """The war room's query string for the hour around ``ts_us``."""
    return urlencode(
        {"from": format_rfc3339(ts_us - half_span_us), "to": format_rfc3339(ts_us + half_span_us)}
    )


class _Groups:
    """Lists of events a page links its figures to: each gets an anchor ``ev-<n>``."""

    def __init__(self, events: dict[int, dict]) -> None:
        self.events, self.lists = events, []

    def anchor(self, title: str, ids: list[int]) -> str:
        anchor = f"ev-{len(self.lists) + 1}"
        shown = [
            {
                **event,
                "shown_ts": utc_seconds(event["ts"]),
                "warroom": warroom_query(parse_timestamp(event["ts"])),
            }
            for event in sorted((self.events[i] for i in ids), key=lambda e: (e["ts"], e["id"]))
        ]
        self.lists.append({"anchor": anchor, "title": title, "events": shown})
        return anchor


def recovery_page_links(found: dict) -> tuple[list[dict], list[dict]]:
    """The schedulers of :func:`recovery.recovery_analytics` with an anchor per figure (``links``,
    and ``link`` on each node and chain row), and the event lists the anchors name."""
    groups = _Groups(found["events"])
    schedulers = []
    for entry in found["schedulers"]:
        org, exclusions = entry["org"], entry["exclusions"]
        retries, manual = entry["retries"], entry["manual"]
        links = {
            "exclusions": groups.anchor(
                f"{org}: all exclusions", [i for r in exclusions["per_entity"] for i in r["events"]]
            ),
            "top": groups.anchor(
                f"{org}: exclusions of the top {exclusions['top']}", exclusions["top_events"]
            ),
            **{
                f"retries_{key}": groups.anchor(f"{org}: auto-retry {key}", ids)
                for key, ids in retries["events"].items()
            },
            **{
                f"manual_{key}": groups.anchor(f"{org}: manual recoveries {key}", ids)
                for key, ids in manual["events"].items()
            },
        }
        per_entity = [
            {**row, "link": groups.anchor(f"{org}: exclusions of {row['entity']}", row["events"])}
            for row in exclusions["per_entity"]
        ]
        chains = [
            {**chain, "link": groups.anchor(f"{org}: {chain['chain']}", chain["events"])}
            for chain in retries["chain_list"]
        ]
        shown = {
            "exclusions": {**exclusions, "top_share_shown": percent_text(exclusions["top_share"])},
            "retries": {**retries, "rate_shown": percent_text(retries["success_rate"])},
            "manual": {**manual, "rate_shown": percent_text(manual["success_rate"])},
        }
        schedulers.append({**entry, **shown, "links": links, "per_entity": per_entity, "chains": chains})
    return schedulers, groups.lists


def checkpoint_summary_shown(summary: dict) -> dict:
    """The summary with its figures as the page writes them: percentages with their unit."""
    return {
        **summary,
        "link_shown": percent_range(summary["link_fraction"]),
        "link_median_shown": percent_text(summary["link_fraction_median"]),
        "fleet_link_shown": percent_range(summary["fleet_link_fraction"]),
        "write_shown": percent_range(summary["write_fraction"]),
    }


def checkpoint_shown(found: dict) -> dict:
    """One checkpoint of :func:`checkpoint.checkpoint_path` with the page's texts: times to the second
    in UTC, shares as percentages, sizes in GiB; the link use of the fleet where no write's own is
    readable (marked so)."""
    if found["link_fraction"]:
        link = percent_range(found["link_fraction"])
    elif found["fleet_link_fraction"]:
        median, busiest = (percent_text(f) for f in found["fleet_link_fraction"])
        link = f"fleet: median {median}, busiest {busiest}"
    else:
        link = UNKNOWN
    size = found["size_bytes"]
    return {
        **found,
        "warroom": warroom_query(parse_timestamp(found["start"])),
        "start_shown": utc_seconds(found["start"]),
        "link_shown": link,
        "slots_shown": percent_text(found["fleet_slot_full_share"], 0),
        "size_shown": UNKNOWN if size is None else f"{size / 2**30:,.0f}",
        "writes": [
            {
                **w,
                "link_shown": percent_text(w["link_fraction"]),
                "slots_shown": UNKNOWN
                if w["slots_max"] is None
                else f"{w['slots_max']:.0f}/{w['slot_table']:.0f}",
                "backlog_shown": UNKNOWN if w["backlog_mean"] is None else f"{w['backlog_mean']:.1f}",
            }
            for w in found["writes"]
        ],
    }
