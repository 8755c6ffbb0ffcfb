"""OAM's pure domain: service, source and pipeline states, pipeline ids and the configured tables."""
