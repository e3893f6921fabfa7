"""Column profiles of the tables: statistics computed with Spark, kept and shown in Dagster."""
