"""What ``tritonsm serve`` runs besides the local endpoint itself: every endpoint behind one port (``--all``)
and the names endpoints are served under."""
