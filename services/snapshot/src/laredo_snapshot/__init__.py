"""The snapshot service: compacts the newest snapshot and the JetStream tail into a new table snapshot (PySpark)."""
