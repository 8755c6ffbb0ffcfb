"""Inbound adapters of the query service (gRPC; HTTP health comes from laredo_core.health)."""
