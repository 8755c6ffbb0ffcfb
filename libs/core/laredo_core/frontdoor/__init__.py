"""The front door of every service port: gRPC, Connect and gRPC-Web, TLS, CORS and limits.

An Envoy process listens on the configured address and bridges every protocol to gRPC; the service's grpcio
server listens only on a Unix socket in a private directory that Envoy alone reaches. See docs/front-door.md.
"""
