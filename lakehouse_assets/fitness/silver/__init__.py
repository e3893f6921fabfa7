"""Silver: validated, typed, deduplicated tables, maintained incrementally from bronze."""
