"""Inbound entrypoints of the fan-out service."""
