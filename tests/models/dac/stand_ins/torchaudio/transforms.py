"""Stand-in (see ../__init__.py)."""
