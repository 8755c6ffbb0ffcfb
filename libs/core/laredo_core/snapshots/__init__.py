"""Table snapshots: the JSON-lines format with its manifest, and the stores that keep them."""
