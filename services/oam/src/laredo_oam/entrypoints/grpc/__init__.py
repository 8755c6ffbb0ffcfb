"""The OAM service's gRPC entrypoint."""
