"""The `laredo` command line: operators' and scripts' access to the OAM and Query services."""
