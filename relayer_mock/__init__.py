"""relayer_mock: a local, persistent, fault-injecting Walrus publisher/aggregator."""
