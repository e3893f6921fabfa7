"""A declared source's silver step run by hand, outside an asset."""

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.refinement.changes import Changes
from lakehouse_assets.refinement.step_asset import StepConfig, StepRun
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.decoding.reading import read_growing
from lakehouse_assets.sources.writing.refine import Refined, refine
from resources import LakeResource
from resources.lake import Markers


def refined(
    lake: LakeResource,
    spark: SparkSession,
    source: SourceDeclaration,
    changes: DataFrame,
    markers: Markers,
    rebuild: bool = False,
) -> Refined:
    """``changes`` (bronze rows) read and refined into the source's tables with ``markers``, as
    the step's run does; ``rebuild``: a full refresh."""
    config = StepConfig(full_refresh=rebuild)
    run = StepRun(dg.build_asset_context(), lake, spark, config, Changes(changes, markers, True))
    return refine(run, source, read_growing(lake, source.read_spec(), changes))
