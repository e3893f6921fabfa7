"""A streaming lakehouse: Kafka and landing-zone files into bronze, silver and gold Delta tables."""
