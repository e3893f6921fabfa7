"""A stream's sensor counts as busy the runs that will write its table: queued or running, and
failed ones whose retry the daemon is about to launch (a new run beside the retry would write the
same tables in an order the checks cannot follow)."""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.sensors.runs import RETRIED, RETRY, runs_in_progress

FAILS = {"now": True}


@dg.asset
def table() -> None:
    if FAILS["now"]:
        raise RuntimeError("killed")


def _failed(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    """A failed run of ``table``, its selection recorded as a sensor's run records it."""
    job = dg.Definitions(assets=[table]).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance, asset_selection=[table.key], tags=tags, raise_on_error=False
    )
    assert not result.success
    return result.run_id


def test_a_failed_run_about_to_be_retried_is_busy_until_its_retry_is_launched() -> None:
    instance = dg.DagsterInstance.ephemeral()
    assert runs_in_progress(instance, table.key) == []
    _failed(instance, {})  # not retried: not busy
    assert runs_in_progress(instance, table.key) == []
    retried = _failed(instance, {RETRY: "true"})
    assert runs_in_progress(instance, table.key) == [retried]
    instance.add_run_tags(retried, {RETRIED: "the retry's run id"})  # the retry counts itself
    assert runs_in_progress(instance, table.key) == []
