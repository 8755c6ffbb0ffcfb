"""Test fixtures: throwaway PostgreSQL, NATS JetStream, Redis and S3 servers."""
