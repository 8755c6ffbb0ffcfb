"""Adapters of the snapshot service: Spark, NATS, snapshot stores, OpenTelemetry, clock."""
