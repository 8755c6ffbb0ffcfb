"""The pure core of the query service: canonical keys, indexed rows, pages and their errors."""
