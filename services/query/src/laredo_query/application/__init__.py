"""Use cases of the query service: applying the change stream, answering queries, subscriptions."""
