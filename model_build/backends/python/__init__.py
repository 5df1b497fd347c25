"""``backend: python``: Python-backend model files and their execution environments."""
