"""Gold: the reports, partitioned by day."""
