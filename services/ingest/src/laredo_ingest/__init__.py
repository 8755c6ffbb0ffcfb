"""Laredo ingest service."""
