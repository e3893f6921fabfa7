"""Schedules: nightly table maintenance."""
