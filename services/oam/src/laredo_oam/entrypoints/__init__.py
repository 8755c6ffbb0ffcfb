"""Inbound adapters of the OAM service (gRPC; HTTP health comes from laredo_core.health)."""
