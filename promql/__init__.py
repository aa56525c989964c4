"""PromQL over the store: Prometheus's query API, so Grafana reads Jointline through a read token.

``parse`` (requests and the ``promql_parser`` tree) → ``engine`` (evaluation over all steps at once,
with ``windows``, ``functions``, ``aggregate`` and ``binary``) → ``encode`` (Prometheus's JSON). The
series a query sees, their labels as the viewer may see them and their samples come from
``selection`` (the access scope and the store); ``catalogue`` answers the label browser; ``api`` and
``urls`` are the HTTP layer. docs/decisions/0007-promql-api.md records the design.
"""
