"""Fan-out domain: table rows, the change journal and the sync-mode decision; pure Python only."""
