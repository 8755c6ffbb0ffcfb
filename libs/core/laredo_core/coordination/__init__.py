"""Coordination between Laredo instances (registry, leases, commands, events): port, Redis adapter, fake."""
