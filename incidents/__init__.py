"""Incidents, annotations, notes, invitations, permalinks, snapshots, exports and the sharing page."""
