"""Time alignment: per-agent clock corrections, applied at query time, and their estimation.

Stored timestamps are what the agents sent (``core.timeparse`` made them UTC microseconds); nothing
here rewrites them. A :class:`~timeline.models.ClockCorrection` says how to shift the data of one
organisation's agent (and optionally one node) when it is read:
``ts' = ts + offset + drift * (ts - reference) / 1 h``, for stored ``ts`` in ``[valid_from, valid_to)``.
Corrections that match the same row add up.

Invariants:

* a correction changes what is *read*, never what is stored: switching it off (or reading with
  ``align=off``) shows the data exactly as sent, so it is reversible and every correction stays on
  record (who, when, from which estimate);
* lane reads shift sample timestamps inside the bucketing SQL (``ClockModel.series_corrections``
  tells the store which); event reads shift ``ts``/``end_ts`` in ``timeline.presenters.present_event``
  and filter the window on the shifted time (``ClockModel.filter_window``);
* the access scope still decides every row: a grant's time limits apply to stored times, and a
  correction of another organisation is listed only to viewers who can read some of the data it
  shifts, with masked label values pseudonymised as the grant masks them;
* one request reads with one clock model, resolved once by its read context
  (``orgs.read_context``): ``use_clock`` turns corrections on or off, ``clock_for`` finds it.

The modules:

* :mod:`.model`: the clock model of a read (``resolve_clock``, ``use_clock``, ``clock_for``,
  ``read_hints``) and how a viewer sees corrections (``present_corrections``, ``clock_state``);
* :mod:`.services`: changing corrections (declare, apply an estimate, switch), each behind
  ``orgs.access.require_role``;
* :mod:`.estimation`: estimates from what a scope may read (anchor pairs, receive times, lagged
  correlation) and the ordering checks of a war-room answer;
* :mod:`.anchors`, :mod:`.estimators`: the estimators on plain values, no database;
* :mod:`.api`: the API and page of clock corrections.

An estimate becomes an active correction only when a person of its organisation applies it.
"""
