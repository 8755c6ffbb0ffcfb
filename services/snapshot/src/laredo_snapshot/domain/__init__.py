"""The snapshot service's pure core: fold records, the compaction plan, the per-key and sequential folds."""
