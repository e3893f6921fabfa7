"""Automation conditions: silver follows bronze, and gold the last week of silver, by themselves
(Dagster's ``eager`` with the changes below), and neither follows a table whose blocking checks
failed."""

from datetime import timedelta

import dagster as dg

# Dagster's eager condition forgets an upstream update once the asset's own materialization lands
# after it, even one from a run that had already read its upstream: bronze committing while a
# silver run reads would leave its rows unread until bronze commits again. Here only a request of
# the asset clears an update it has seen, so an update seen while the asset runs gets a run of its
# own afterwards (which finds nothing new if the running one read it after all). The request is
# seen on the tick after it, and Dagster's `since` lets a reset win over a trigger of the same
# tick: an update between the two ticks would be forgotten, so a tick that sees both keeps it.
requested = dg.AutomationCondition.newly_requested()
first_tick = dg.AutomationCondition.initial_evaluation()
# A stream sensor's run selects the tables that follow its bronze table (sensors/chain.py), and
# Dagster's any_deps_updated leaves out an upstream write made by a run that selected the asset,
# though the run may have ended before the asset's step (cancelled, its worker killed past its
# retries): the asset's failure in such a run is then a reason of its own to run. Only a stream
# run's: a run automation launched and that failed is not retried by automation again.
STREAM_TAG = "lakehouse/stream"
failed_in_a_stream_run = (
    dg.AutomationCondition.execution_failed().newly_true()
    & dg.AutomationCondition.executed_with_tags(tag_keys={STREAM_TAG})
).with_label("failed in a stream's run")
# Eager forgets what happened before its first evaluation (there is nothing to compare with):
# a table whose upstream was written before that, as when the runs of a new instance end while
# the daemon is down before its first tick, would wait for the next upstream write. A missing
# table is started whenever its upstream tables are there, unless its latest run failed (a
# failing table is not retried at every tick; the next upstream write starts it again).
missing_not_failed = (
    dg.AutomationCondition.missing() & ~dg.AutomationCondition.execution_failed()
).with_label("missing, its latest run not failed")
updated = (
    dg.AutomationCondition.newly_missing()
    | dg.AutomationCondition.any_deps_updated()
    | failed_in_a_stream_run
).with_label("updated")
# Dagster's eager() with those changes.
eager = (
    dg.AutomationCondition.in_latest_time_window()
    & (
        updated.since((requested & ~updated) | first_tick).with_label("updated, until requested")
        | missing_not_failed
    )
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("eager, until requested")

# Late data changes recent days: gold follows silver for the last week of partitions by itself;
# older days are refreshed by a backfill from the asset graph.
GOLD_AUTOMATION_LOOKBACK = timedelta(days=7)
# Neither follows an upstream table whose blocking checks failed.
checks_passed = dg.AutomationCondition.all_deps_blocking_checks_passed()
gold_automation = (
    eager.replace(
        "in_latest_time_window",
        dg.AutomationCondition.in_latest_time_window(lookback_delta=GOLD_AUTOMATION_LOOKBACK),
    )
    & checks_passed
)
# Silver follows bronze as soon as bronze has new data.
silver_automation = eager & checks_passed
