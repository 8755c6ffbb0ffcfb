"""OAM adapters: the in-memory coordination fake (the Redis adapter lives in laredo_core.coordination)."""
