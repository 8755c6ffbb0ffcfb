"""OAM adapters: the JetStream change tail, the front door's query routes, metrics and the in-memory fakes."""
