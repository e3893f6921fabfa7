"""Declared sources: Kafka topics brought into bronze and silver by a YAML declaration."""
