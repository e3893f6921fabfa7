"""Code generation by the size of a step's batch: interpreted for a small one, in the step's own
session; the application's setting (Spark's default, generated code) otherwise."""

from __future__ import annotations

from pyspark.sql import SparkSession

# Interpreted execution: no code generated per query (``factoryMode`` is an internal setting of
# Spark's). On a small batch, generating and compiling each query's code costs more than it
# saves: the sample graph on a warm server takes 0.80-0.86x the time and CPU without it. On a
# large one it pays: bronze ingesting 10M records takes 1.6-2.4x the time without it
# (docs/benchmarks.md). So the server keeps Spark's default and a step with a small batch turns
# it off in its own session (``fit_code_generation``).
INTERPRETED: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
SMALL_BATCH_ROWS = 100_000
# Sessions that ``fit_code_generation`` interprets, by id: their settings before it.
_BEFORE_INTERPRETED: dict[int, dict[str, str | None]] = {}


def fit_code_generation(spark: SparkSession, rows: int) -> None:
    """Let Spark interpret the session's queries while its step's batch is small (fewer than
    ``SMALL_BATCH_ROWS`` rows to read; ``INTERPRETED``), else generate code as the application
    does. A session handed to another step gets its settings back (``restore_code_generation``).
    """
    if rows >= SMALL_BATCH_ROWS:
        restore_code_generation(spark)
        return
    if id(spark) in _BEFORE_INTERPRETED:
        return
    before = {key: spark.conf.get(key, None) for key in INTERPRETED}
    _BEFORE_INTERPRETED[id(spark)] = before
    for key, value in INTERPRETED.items():
        if before[key] != value:
            spark.conf.set(key, value)


def restore_code_generation(spark: SparkSession) -> None:
    """Undo ``fit_code_generation``'s settings in the session, if it made any."""
    before = _BEFORE_INTERPRETED.pop(id(spark), None)
    for key, value in (before or {}).items():
        if value is None:
            spark.conf.unset(key)
        elif value != INTERPRETED[key]:
            spark.conf.set(key, value)


def forget(spark: SparkSession) -> None:
    """``spark`` is stopped: its settings need no restoring (and its id may be reused)."""
    _BEFORE_INTERPRETED.pop(id(spark), None)
