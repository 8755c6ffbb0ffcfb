"""Laredo query service."""
