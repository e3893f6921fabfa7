"""A table profile shown where people look: Dagster metadata (a per-column table, a markdown
summary, the numeric columns' histograms as an image), rows for the profile's Delta table, and
text for the terminal."""

from __future__ import annotations

import base64
import io
from datetime import datetime
from typing import Any

import dagster as dg
import pyarrow as pa

from lakehouse_assets.profiling.model import ColumnProfile, TableProfile

SHOWN_TOP = 5  # most frequent values and patterns shown per column in the UI and the terminal
STATISTICS = {  # column of the per-column table -> its type in Dagster's table schema
    "column": "string", "type": "string", "count": "int", "missing": "int", "density": "float",
    "distinct": "int", "min": "string", "max": "string", "mean": "float", "stddev": "float",
    "q1": "float", "median": "float", "q3": "float", "outliers": "int", "min_length": "int",
    "max_length": "int", "avg_length": "float", "top_values": "string", "patterns": "string",
}  # fmt: skip
_PAIRS = pa.list_(pa.struct([("value", pa.string()), ("count", pa.int64())]))
PROFILE_SCHEMA = pa.schema([
    ("profiled_at", pa.timestamp("us", tz="UTC")), ("table_version", pa.int64()),
    ("rows", pa.int64()), ("column", pa.string()), ("data_type", pa.string()),
    ("count", pa.int64()), ("missing", pa.int64()), ("density", pa.float64()),
    ("distinct", pa.int64()), ("distinct_exact", pa.bool_()), ("minimum", pa.string()),
    ("maximum", pa.string()), ("mean", pa.float64()), ("stddev", pa.float64()),
    ("q1", pa.float64()), ("median", pa.float64()), ("q3", pa.float64()),
    ("outliers", pa.int64()), ("min_length", pa.int64()), ("max_length", pa.int64()),
    ("avg_length", pa.float64()), ("top_values", _PAIRS), ("patterns", _PAIRS),
    ("histogram", pa.list_(pa.struct(
        [("lower", pa.float64()), ("upper", pa.float64()), ("count", pa.int64())]))),
    ("correlations", pa.list_(pa.struct([("column", pa.string()), ("value", pa.float64())]))),
    ("candidate_key", pa.bool_()), ("frequencies_exact", pa.bool_()),
])  # fmt: skip


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _pairs(pairs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{value!r} ({count})" for value, count in pairs[:SHOWN_TOP])


def _statistics(column: ColumnProfile) -> dict[str, Any]:
    """One column's statistics under the names of ``STATISTICS``."""
    return {
        "column": column.name, "type": column.data_type, "count": column.count,
        "missing": column.missing, "density": column.density, "distinct": column.distinct,
        "min": _text(column.minimum), "max": _text(column.maximum), "mean": column.mean,
        "stddev": column.stddev, "q1": column.q1, "median": column.median, "q3": column.q3,
        "outliers": column.outliers, "min_length": column.min_length,
        "max_length": column.max_length, "avg_length": column.avg_length,
        "top_values": _pairs(column.top_values), "patterns": _pairs(column.patterns),
    }  # fmt: skip


def _correlations(profile: TableProfile, name: str) -> list[dict[str, Any]]:
    """The correlations of column ``name`` with each other numeric column."""
    return [
        {"column": b if a == name else a, "value": value}
        for (a, b), value in profile.correlations.items()
        if name in (a, b)
    ]


def profile_rows(profile: TableProfile, profiled_at: datetime, version: int | None) -> pa.Table:
    """One row per column, for the Delta table ``<root>/profiles/<layer>__<table>``."""
    keys = {column for key in profile.candidate_keys if len(key) == 1 for column in key}
    rows = []
    for column in profile.columns:
        stats = _statistics(column)
        rows.append({
            "profiled_at": profiled_at, "table_version": version, "rows": profile.rows,
            "column": column.name, "data_type": column.data_type, "count": column.count,
            "missing": column.missing, "density": column.density, "distinct": column.distinct,
            "distinct_exact": column.distinct_exact, "minimum": stats["min"],
            "maximum": stats["max"], "mean": column.mean, "stddev": column.stddev,
            "q1": column.q1, "median": column.median, "q3": column.q3,
            "outliers": column.outliers, "min_length": column.min_length,
            "max_length": column.max_length, "avg_length": column.avg_length,
            "top_values": [{"value": v, "count": n} for v, n in column.top_values],
            "patterns": [{"value": v, "count": n} for v, n in column.patterns],
            "histogram": [{"lower": lo, "upper": hi, "count": n} for lo, hi, n in column.histogram],
            "correlations": _correlations(profile, column.name),
            "candidate_key": column.name in keys, "frequencies_exact": column.frequencies_exact,
        })  # fmt: skip
    return pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA)


def _summary(profile: TableProfile) -> str:
    keys = ", ".join("(" + ", ".join(key) + ")" for key in profile.candidate_keys) or "none"
    shape = f"{profile.rows:,} rows, {len(profile.columns)} columns"
    estimated = "" if profile.keys_exact else " (estimated)"
    lines = [f"**{shape}.** Candidate keys{estimated}: {keys}.", ""]
    for c in profile.columns:
        density = "-" if c.density is None else f"{c.density:.1%}"
        distinct = "" if c.distinct is None else f", {c.distinct:,} distinct"
        approx = "" if c.distinct_exact else " (approx.)"
        frequent = "" if c.frequencies_exact else "; most frequent values estimated"
        lines.append(f"- `{c.name}` ({c.data_type}): {density} filled{distinct}{approx}{frequent}")
    if profile.correlations:
        numeric = list(dict.fromkeys(name for pair in profile.correlations for name in pair))
        lines += ["", "| | " + " | ".join(numeric) + " |", "|---" * (len(numeric) + 1) + "|"]
        for a in numeric:
            cells = [_correlation(profile, a, b) for b in numeric]
            lines.append(f"| **{a}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _correlation(profile: TableProfile, a: str, b: str) -> str:
    if a == b:
        return "1"
    value = profile.correlations.get((a, b), profile.correlations.get((b, a)))
    return "-" if value is None else f"{value:.2f}"


def _histograms_png(columns: list[ColumnProfile]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, len(columns), figsize=(3 * len(columns), 2.4), squeeze=False)
    for axis, column in zip(axes[0], columns, strict=True):
        lows = [low for low, _, _ in column.histogram]
        widths = [high - low for low, high, _ in column.histogram]
        axis.bar(lows, [n for _, _, n in column.histogram], width=widths, align="edge")
        axis.set_title(column.name, fontsize=9)
        axis.tick_params(labelsize=7)
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=72)
    plt.close(figure)
    return image.getvalue()


def profile_metadata(profile: TableProfile) -> dict[str, dg.MetadataValue]:
    """The profile as materialization metadata: ``profile`` (a table, one record per column),
    ``profile_summary`` (markdown) and, for numeric columns, ``profile_histograms`` (an image)."""
    schema = dg.TableSchema(
        columns=[dg.TableColumn(name, kind) for name, kind in STATISTICS.items()]
    )
    records = [dg.TableRecord(_statistics(column)) for column in profile.columns]
    metadata: dict[str, dg.MetadataValue] = {
        "profile": dg.MetadataValue.table(records, schema),
        "profile_summary": dg.MetadataValue.md(_summary(profile)),
    }
    numeric = [c for c in profile.columns if c.histogram]
    if numeric:
        encoded = base64.b64encode(_histograms_png(numeric)).decode()
        markdown = f"![histograms](data:image/png;base64,{encoded})"
        metadata["profile_histograms"] = dg.MetadataValue.md(markdown)
    return metadata


def format_profile(profile: TableProfile) -> str:
    """The profile as text for a terminal: the summary, then each column's statistics."""
    lines = [_summary(profile).replace("**", ""), ""]
    for column in profile.columns:
        lines.append(f"{column.name}:")
        stats = _statistics(column)
        lines += [f"  {name}: {value}" for name, value in stats.items()
                  if name not in ("column",) and value not in (None, "")]  # fmt: skip
        if column.histogram:
            bins = ", ".join(f"[{lo:g}, {hi:g}): {n}" for lo, hi, n in column.histogram)
            lines.append(f"  histogram: {bins}")
    return "\n".join(lines)
