"""Laredo oam service."""
