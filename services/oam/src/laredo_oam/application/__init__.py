"""OAM use cases over the CoordinationStore port: status views and administration commands."""
