"""A source's batch into its silver tables as its mode says: appended, latest per key, SCD1 or
SCD2 (refine.py, writes.py, cdc.py), its rows (transforms.py), its rules and column
descriptions."""
