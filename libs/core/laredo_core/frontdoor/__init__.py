"""The front door of every service port: Envoy bridging gRPC, Connect and gRPC-Web (see docs/front-door.md)."""
