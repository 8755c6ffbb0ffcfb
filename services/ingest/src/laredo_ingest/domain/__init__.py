"""Pure ingest domain: pgoutput decoding, transaction assembly, confirmation and start decisions."""
