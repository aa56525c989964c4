"""Operating Jointline: health and readiness probes, Prometheus metrics, retention, store size."""
