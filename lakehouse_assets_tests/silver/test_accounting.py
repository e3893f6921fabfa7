"""What a parsed step's merge commit must record of its rows (``silver.accounting``)."""

from __future__ import annotations

from lakehouse_assets.silver.accounting import MergedBatch


def test_a_merge_into_a_table_records_every_source_row_deletes_included() -> None:
    batch = MergedBatch(days=["2025-01-01"], rows=5, deletes=2, table_before=3)
    assert batch.expected_written == 5  # numSourceRows: the deletes are source rows too


def test_a_merge_that_creates_the_table_appends_only_the_rows_kept() -> None:
    assert MergedBatch(days=None, rows=5, deletes=2, table_before=None).expected_written == 3
    # A first batch of deletes only (of keys never seen) writes an empty table: 0 rows.
    assert MergedBatch(days=None, rows=4, deletes=4, table_before=None).expected_written == 0
    assert MergedBatch(days=[], rows=0, deletes=0, table_before=None).expected_written == 0
