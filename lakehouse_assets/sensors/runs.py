"""The runs that will write a table: what makes a stream's sensor wait."""

from __future__ import annotations

import dagster as dg

IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
RETRY = "dagster/will_retry"  # on a failed run the run retries will launch again
RETRIED = "dagster/auto_retry_run_id"  # on a failed run whose retry was launched


def runs_in_progress(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[str]:
    """The ids of the queued or running runs that will materialize ``key``, and of the failed
    ones whose retry is about to be launched. (A new run beside a retry would write the same
    tables; Dagster then counts the checks of the run planned last, which may have written
    first, and what follows waits for the tables' next write.)"""
    records = [
        *instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS)),
        *instance.get_run_records(
            dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], tags={RETRY: "true"}),
            limit=20,
        ),
    ]
    return [
        record.dagster_run.run_id
        for record in records
        if key in (record.dagster_run.asset_selection or ())
        and RETRIED not in record.dagster_run.tags
    ]
