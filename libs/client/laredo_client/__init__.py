"""Python client library: a local, indexed, live replica of a Laredo table."""
