"""Data-quality checks: the rules of each table and the Dagster asset checks made of them."""
