"""Documents read in bulk from the application's PostgreSQL store, on the executors: every id of a
Spark partition in one query, whatever the document kinds (``mapInArrow``).

The store keeps one table per document kind, ``(id text primary key, doc jsonb)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

DOCUMENT, LOOKUPS = "_document", "_lookups"  # the document's JSON; queries made (first row)


def output_fields() -> list[tuple[str, pa.DataType]]:
    """The columns ``read_documents`` adds to its rows."""
    return [(DOCUMENT, pa.binary()), (LOOKUPS, pa.int32())]


def query(tables: Mapping[str, str], kinds: list[str]) -> Any:
    """One statement reading the documents of ``kinds`` from their tables by id (a ``text[]``
    parameter per kind): rows ``(kind, id, document)``."""
    from psycopg2 import sql

    parts = [
        sql.SQL("SELECT {kind}, id, doc::text FROM {table} WHERE id = ANY(%s)").format(
            kind=sql.Literal(kind), table=sql.Identifier(tables[kind])
        )
        for kind in kinds
    ]
    return sql.SQL(" UNION ALL ").join(parts)


def read_documents(
    batches: Iterator[pa.RecordBatch],
    url: str,
    tables: Mapping[str, str],
    kind_column: str,
    id_column: str,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: the partition's rows with their document (``_document``, null
    when the store no longer has it) and ``_lookups`` (the queries made, on the first row)."""
    import psycopg2

    present = [batch for batch in batches if batch.num_rows]
    if not present:  # an empty partition (a batch of deletes only, or of filtered notices)
        return
    rows = pa.Table.from_batches(present)
    kinds = rows.column(kind_column).to_pylist()
    ids = rows.column(id_column).to_pylist()
    wanted: dict[str, list[str]] = {}
    for kind, document_id in zip(kinds, ids, strict=True):
        wanted.setdefault(kind, []).append(document_id)
    statement = query(tables, sorted(wanted))
    connection = psycopg2.connect(url)
    try:
        connection.set_session(readonly=True, autocommit=True)
        with connection.cursor() as cursor:
            cursor.execute(statement, [wanted[kind] for kind in sorted(wanted)])
            found = {(kind, id_): doc.encode() for kind, id_, doc in cursor.fetchall()}
    finally:
        connection.close()
    documents = [found.get(key) for key in zip(kinds, ids, strict=True)]
    lookups = [1] + [0] * (rows.num_rows - 1)
    out = rows.append_column(DOCUMENT, pa.array(documents, pa.binary()))
    out = out.append_column(LOOKUPS, pa.array(lookups, pa.int32()))
    yield from out.to_batches()
