"""Use cases of the snapshot service: compact one table, run compactions once or on a schedule, coordinate."""
