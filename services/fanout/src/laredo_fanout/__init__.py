"""Laredo fanout service."""
