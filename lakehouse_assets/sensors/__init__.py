"""Sensors: Kafka lag and landing-zone arrivals launch the bronze streams."""
