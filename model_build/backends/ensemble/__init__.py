"""``backend: ensemble``: an ensemble's config from its built steps."""
