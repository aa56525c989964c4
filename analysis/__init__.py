"""Analysis within grants: what changed, onsets, detection, root cause through dependencies,
forecasts and the findings of an investigation."""
