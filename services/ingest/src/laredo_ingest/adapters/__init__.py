"""Adapters: psycopg, NATS JetStream, OpenTelemetry, and in-memory fakes."""
