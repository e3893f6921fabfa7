"""Bronze: raw records from Kafka topics and landing-zone files, exactly once."""
