"""Adapters of the query service ports: NATS JetStream, the system clock, and in-memory fakes."""
