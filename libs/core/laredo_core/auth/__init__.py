"""Who may call what: bearer tokens, JWT and client certificates mapped to roles, checked on every RPC.

`auth { ... }` (settings) names the credentials; `AuthInterceptor` (interceptor) checks each call against the
method rules (rules) with the same outcome on gRPC, Connect and gRPC-Web. See docs/security.md.
"""
