"""The `laredo` commands, one module per area; each has register(commands, common, formatter)."""
