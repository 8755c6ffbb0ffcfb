"""Ingest use cases: start-up, baseline, streaming, retry."""
