"""Entrypoints: HTTP health."""
