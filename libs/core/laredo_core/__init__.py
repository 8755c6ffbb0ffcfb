"""Shared domain types and infrastructure helpers for every Laredo service."""
