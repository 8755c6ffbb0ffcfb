"""Fan-out adapters: NATS change feed, protobuf encoder, OpenTelemetry observer, in-memory fakes."""
