"""A declared source whose records' fields are declared (``fields``), as a table parsed by fixed
rules (``refinement.parsed``), the step the fitness pipeline's parsed tables take: each field
typed and checked by ``validation.parse_json``, a record breaking a rule quarantined with the
first it breaks, the rest kept as the mode says (append: appended, keyed by the record's Kafka
coordinates; latest-per-key: merged by the declared keys)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectations import mark_dropped, require_conditions
from lakehouse_assets.checks.rules import TableRules, accepted_values, primary_key
from lakehouse_assets.refinement.parsed_table import ParsedTable, Transform
from lakehouse_assets.sources.declaration.model import LANDING, SourceDeclaration
from lakehouse_assets.sources.writing.columns import ADDED
from lakehouse_assets.sources.writing.transforms import (
    KAFKA_COLUMNS,
    LANDING_COLUMNS,
    newest_per_key,
    refined,
)
from lakehouse_assets.validation import (
    REASON,
    SQL_TYPE,
    TOMBSTONE,
    JsonField,
    csv_quarantine,
    kafka_quarantine,
    parse_csv,
    parse_json,
)
from resources.delta_merge import Condition, later

COORDINATES = ("_kafka_topic", "_kafka_partition", "_kafka_offset")
DESCRIPTIONS = {
    "append": "Every valid record of the declared source `{name}`, its declared fields typed, "
    "with the Kafka coordinates (`_kafka_*`).",
    "latest-per-key": "The latest valid record of each `{keys}` of the declared source `{name}` "
    "(of one batch, the highest offset; a later batch's replaces it), its declared fields typed, "
    "with the Kafka coordinates (`_kafka_*`).",
    "csv": "The latest valid row of each `{keys}` of the CSV files of the declared source "
    "`{name}` (of the files read last, the greatest row), its columns typed, with the file it "
    "came from (`_landing_file`) and when it was read (`_ingested_at`).",
}


def json_fields(source: SourceDeclaration) -> tuple[JsonField, ...]:
    """The source's declared fields as ``validation`` reads them."""
    empty_is_null = not source.keeps_empty_strings
    return tuple(
        JsonField(
            f.name, f.type, f.required, f.allowed, f"$.{f.path}" if f.path else None, empty_is_null
        )
        for f in source.fields
    )


def _describe(field: JsonField) -> str:
    rules = ["required" if field.required else "optional"]
    if field.allowed:
        rules.append(f"one of {', '.join(field.allowed)}")
    if field.path:
        rules.append(f"at `{field.path}`")
    return f"The record's declared field `{field.name}` ({field.kind}; {'; '.join(rules)})."


def _later_row(names: list[str]) -> Condition:
    """Of a csv source's two rows of one key, whether the source row is the one ``shape``
    keeps: of the file read later, then of the greater name, then the greater row."""
    order = ["_ingested_at", "_landing_file", *names]
    return lambda source, target: (
        F.struct(*[source(c) for c in order]) > F.struct(*[target(c) for c in order])
    )


def _csv_parts(source: SourceDeclaration) -> tuple[Transform, Transform, dict[str, str]]:
    """A csv source's parse and shape, and the columns its rows have beside the fields."""
    names = [field.name for field in source.fields]
    numeric = {field.name for field in source.fields if field.type == "integer"}

    def parse(lines: DataFrame) -> DataFrame:
        """Landing lines read by position, each column typed and required, with a ``reason``
        for each line that breaks a rule (header and blank lines skipped)."""
        return _dropped(source, parse_csv(lines, names, numeric))

    def shape(valid: DataFrame) -> DataFrame:
        """Of each key, the row of the file read last (of one file, the greatest row), with the
        file it came from and when it was read."""
        order = [F.col("ingested_at").desc(), F.col("source_file").desc()]
        newest = Window.partitionBy(*source.keys).orderBy(*order, *[F.desc(n) for n in names])
        rows = valid.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1")
        origin = [F.col(c).alias(name) for name, c in LANDING_COLUMNS.items()]
        return rows.select(*names, *origin)

    return parse, shape, {name: ADDED[name] for name in LANDING_COLUMNS}


def _json_parts(source: SourceDeclaration) -> tuple[Transform, Transform, dict[str, str]]:
    """A json source's parse and shape, and the columns its rows have beside the fields."""
    fields = json_fields(source)
    names = [field.name for field in fields]

    def parse(records: DataFrame) -> DataFrame:
        """Bronze records with their declared fields typed and a ``reason`` for each record
        that breaks a rule, a tombstone's (a record without a value) first."""
        parsed = parse_json(records, fields)
        tombstone = F.when(F.col("value").isNull(), F.lit(TOMBSTONE))
        return _dropped(source, parsed.withColumn(REASON, F.coalesce(tombstone, F.col(REASON))))

    def shape(valid: DataFrame) -> DataFrame:
        """The valid records' fields and Kafka coordinates (latest-per-key: the newest of each
        key in the batch)."""
        rows = refined(valid, names, [])
        return newest_per_key(rows, source.keys) if source.mode == "latest-per-key" else rows

    return parse, shape, {column: ADDED[column] for column in KAFKA_COLUMNS}


def _dropped(source: SourceDeclaration, parsed: DataFrame) -> DataFrame:
    """``parsed`` with the reason of each valid record a ``drop`` expectation removes.

    Raises:
        ExpectationError: a check is not a condition of the records (``require_conditions``).
    """
    expectations = [declared.expectation() for declared in source.expectations]
    if not expectations:
        return parsed
    require_conditions(parsed, expectations)
    return mark_dropped(parsed, expectations, REASON, F.col(REASON).isNull())


def fields_table(source: SourceDeclaration) -> ParsedTable:
    """``silver.<source>`` of a source with declared fields, and its quarantine."""
    landing = source.format == LANDING
    parse, shape, added = _csv_parts(source) if landing else _json_parts(source)
    keys = source.keys if source.mode == "latest-per-key" else COORDINATES
    fields = json_fields(source)
    accepted = tuple(accepted_values(f.name, f.allowed) for f in fields if f.allowed)
    description = DESCRIPTIONS["csv" if landing else source.mode]
    return ParsedTable(
        source.name,
        source.name,
        parse,
        csv_quarantine if landing else kafka_quarantine,
        shape,
        tuple(keys),
        rules=TableRules((*primary_key(*keys), *accepted)),
        expectations=tuple(declared.expectation() for declared in source.expectations),
        descriptions={**{field.name: _describe(field) for field in fields}, **added},
        owners=source.owners,
        description=description.format(name=source.name, keys=", ".join(keys))
        + (f"\n\n{source.description}" if source.description else ""),
        tags={"lakehouse/mode": source.mode},
        append=source.mode == "append",
        column_types={field.name: SQL_TYPE[field.type] for field in source.fields},
        # A replayed row replaces its key's row only if the stream would have kept it instead.
        replay_when=_later_row([f.name for f in source.fields])
        if landing
        else later("_kafka_offset"),
    )
