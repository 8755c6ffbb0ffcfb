"""The query service's gRPC entrypoint."""
