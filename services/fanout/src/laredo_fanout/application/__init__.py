"""Fan-out use cases: apply the change stream, serve Sync sessions, report status."""
