"""The Replication gRPC service (spec and upstream names) over the fan-out use cases."""
