"""Laredo's pure kernel: positions, change types, row tuples, value conversions and errors (standard library only)."""
