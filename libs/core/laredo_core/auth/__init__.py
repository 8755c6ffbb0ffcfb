"""Who may call what: credentials mapped to roles, checked on every RPC on every protocol (see docs/security.md)."""
