"""Rebuilding a running instance's table from a snapshot plus the stream tail (OAM restore and replay)."""
