"""One factory for the multi-asset of a silver step, whatever carries its records to its tables:
fixed rules (``parsed.ParsedStep``) or a declared source's schema and mode
(``sources.assets.DeclaredStep``).

Every run starts the same way (``start``): with the quarantine's records when its config asks
for a replay, else with the bronze changes its table has not consumed. It travels as one
``StepRun`` into the step's ``refine``, which returns what it did as a ``Refinement``;
``refined_results`` reports both tables, the step adds the other tables it wrote (``more``), and
an expectation that fails on violation fails the run last, once all is recorded.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectation_results import fail_broken
from lakehouse_assets.checks.expectations import Expectation
from lakehouse_assets.constants import BRONZE, SILVER, writer_pool
from lakehouse_assets.migrations import Upgrade, require_current
from lakehouse_assets.refinement.changes import Changes, SilverConfig, read_changes
from lakehouse_assets.refinement.replay import Replay, ReplayConfig, Replaying, replaying
from lakehouse_assets.refinement.step import Refinement, refined_results
from resources import LakeResource, SparkResource
from resources.delta import CHANGE_TYPE, Markers


class StepConfig(SilverConfig):
    """Options of one run of a silver step."""

    replay: ReplayConfig | None = Field(
        default=None,
        description="Replay the source's quarantine instead of reading new records: its open "
        "records (those chosen here) read again from bronze by today's rules; those that pass "
        "reach the table and are logged replayed, the others stay with their new reason.",
    )


@dataclass(frozen=True)
class StepRun:
    """One run of a silver step, as its ``refine`` takes it: where it runs (``context``,
    ``lake``, ``spark``), its ``config``, the records it reads (``changes``: bronze's new ones,
    or the ``replayed`` quarantine's) and the markers its writes commit with them."""

    context: dg.AssetExecutionContext
    lake: LakeResource
    spark: SparkSession
    config: StepConfig
    changes: Changes
    replayed: Replaying | None = None

    @property
    def markers(self) -> Markers:
        return self.changes.markers

    @property
    def rebuild(self) -> bool:
        """Whether the run replaces each table with what all of bronze makes of it."""
        return self.config.full_refresh


class SilverStep(ABC):
    """What a kind of silver step brings to the factory: its tables (``silver.<table>``, and
    ``silver.<source>_quarantine`` for the records ``bronze.<source>`` has that break its
    rules), their specs and checks, its config, and ``refine``."""

    table: str
    source: str
    config_type: type[StepConfig] = StepConfig
    expectations: Sequence[Expectation] = ()
    quarantine_upgrade: Upgrade | None = None  # the quarantine's, if an earlier layout wrote it
    change_type: bool = False  # whether ``refine`` reads the kind of each change
    tombstones: bool = False  # whether a replay reads a Kafka tombstone as a record

    @abstractmethod
    def specs(self) -> list[dg.AssetSpec]:
        """The specs of ``silver.<table>``, the quarantine and the step's other tables."""

    @abstractmethod
    def check_specs(self) -> list[dg.AssetCheckSpec]:
        """The checks of its tables."""

    @abstractmethod
    def refine(self, run: StepRun) -> Refinement:
        """Carry the run's records to the step's tables; returns what it did."""

    def more(self, run: StepRun) -> Iterator[dg.MaterializeResult]:
        """The materializations of the step's other tables, after a run."""
        return iter(())


def start(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    spark: SparkSession,
    step: SilverStep,
    config: StepConfig,
) -> StepRun:
    """A run of ``step``: the quarantine's records a replay chose, or the bronze changes
    ``silver.<table>`` has not consumed (all of them for a full refresh).

    Raises:
        dg.Failure: a replay that also asks for a full refresh, or whose config cannot be read.
        migrations.OutdatedTableError: the quarantine is of an earlier layout.
    """
    if config.replay is None:
        upstream = (BRONZE, step.source)
        changes = read_changes(
            lake, spark, step.table, upstream, config.full_refresh, step.change_type
        )
        return StepRun(context, lake, spark, config, changes)
    if config.full_refresh:
        raise dg.Failure(
            "A run replays the quarantine or rebuilds the tables (full_refresh), not both."
        )
    replay = Replay.of(config.replay, context.run_id)
    require_current(lake, step.quarantine_upgrade)
    replayed = replaying(lake, spark, step.source, replay, step.tombstones)
    records = replayed.records
    if step.change_type:  # a replay brings each record as if it arrived anew
        records = records.withColumn(CHANGE_TYPE, F.lit("insert"))
    return StepRun(context, lake, spark, config, Changes(records, {}, fresh=True), replayed)


def silver_step_asset(step: SilverStep) -> dg.AssetsDefinition:
    """The multi-asset ``silver_<table>`` of ``step``, in the pool of its table's writers."""

    def _asset(
        context: dg.AssetExecutionContext,
        config: StepConfig,
        spark: SparkResource,
        lake: LakeResource,
    ) -> Iterator[dg.MaterializeResult]:
        session = spark.get_session()
        run = start(context, lake, session, step, config)
        done = step.refine(run)
        yield from refined_results(context, lake, session, step.table, step.source, done)
        yield from step.more(run)
        fail_broken(done.checks, step.expectations)

    # Dagster reads a run's config schema from the annotation of ``config``: the step's own.
    _asset.__annotations__ = {**_asset.__annotations__, "config": step.config_type}
    return dg.multi_asset(
        name=f"silver_{step.table}",
        pool=writer_pool(SILVER, step.table),
        specs=step.specs(),
        check_specs=step.check_specs(),
    )(_asset)
