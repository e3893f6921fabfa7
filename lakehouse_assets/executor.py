"""The run's executor: the steps of a run in threads of the run's own process, as many at once as
``max_concurrent`` allows, each as soon as its upstream steps are done.

A step of this project spends its time waiting on the Spark Connect server (every call is a
round trip), not computing in Python, and the server runs concurrent queries: independent steps
(the bronze streams, the silver tables of different topics) overlap in one process, and a run of
one step pays nothing for it. Dagster's multiprocess executor overlaps them too, at the price of
a process per step (imports, resources, a Spark session: seconds on a small run); its in-process
executor runs one step at a time. Each thread has its own Spark session on the server
(``SparkResource.get_session``), released when its step ends, so session settings (a merge's
transaction marker) stay the step's own; the pools of ``docs/dagster.md`` keep one writer per
table across steps and runs.

The loop is Dagster's in-process loop (``dagster._core.execution.plan.execute_plan``) with the
steps' event sequences drawn from threads: the same plan bookkeeping (``ActiveExecution``: order,
pools, retries, skips after a failure), the events handled and yielded in the run's thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import ExecuteRunWithPlanIterable
from dagster._core.execution.compute_logs import create_compute_log_file_key
from dagster._core.execution.context.system import PlanExecutionContext, PlanOrchestrationContext
from dagster._core.execution.context_creation_job import PlanExecutionContextManager
from dagster._core.execution.execute_in_process import core_execute_in_process
from dagster._core.execution.plan.execute_plan import _trigger_hook, dagster_event_sequence_for_step
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.retries import RetryMode, get_retries_config
from dagster._utils.timing import time_execution_scope
from dagster_shared.utils.timing import format_duration

from resources.settings import max_concurrent_steps
from resources.spark import release_thread_sessions

_DONE = object()  # a thread's last item: its step's events are all put


class ThreadedExecutor(dg.Executor):
    """Runs the plan's steps in up to ``max_concurrent`` threads of this process."""

    def __init__(self, retries: RetryMode, max_concurrent: int) -> None:
        self._retries = retries
        self.max_concurrent = max_concurrent

    @property
    def retries(self) -> RetryMode:
        return self._retries

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[DagsterEvent]:
        keys = execution_plan.step_keys_to_execute
        yield DagsterEvent.engine_event(
            plan_context,
            f"Executing steps in threads of process {os.getpid()}, at most "
            f"{self.max_concurrent} at once",
            event_specific_data=EngineEventData.in_process(os.getpid(), keys),
        )
        with time_execution_scope() as timer:
            yield from ExecuteRunWithPlanIterable(
                execution_plan=plan_context.execution_plan,
                iterator=self._iterate,
                execution_context_manager=PlanExecutionContextManager(
                    job=plan_context.job,
                    retry_mode=plan_context.retry_mode,
                    execution_plan=plan_context.execution_plan,
                    run_config=plan_context.run_config,
                    dagster_run=plan_context.dagster_run,
                    instance=plan_context.instance,
                    raise_on_error=plan_context.raise_on_error,
                    output_capture=plan_context.output_capture,
                ),
            )
        yield DagsterEvent.engine_event(
            plan_context,
            f"Finished steps in threads of process {os.getpid()} in "
            f"{format_duration(timer.millis)}",
            event_specific_data=EngineEventData.in_process(os.getpid(), keys),
        )

    def _iterate(
        self, job_context: PlanExecutionContext, execution_plan: ExecutionPlan
    ) -> Iterator[DagsterEvent]:
        logs = job_context.instance.compute_log_manager
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        running: dict[str, list[DagsterEvent]] = {}  # step key -> its events so far
        contexts: dict[str, Any] = {}
        failure: BaseException | None = None
        with (
            InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as pools,
            execution_plan.start(
                retry_mode=job_context.retry_mode,
                max_concurrent=self.max_concurrent,
                instance_concurrency_context=pools,
            ) as active,
            contextlib.ExitStack() as capture,
        ):
            step_keys = [step.key for step in execution_plan.get_steps_to_execute_in_topo_order()]
            log_key = logs.build_log_key_for_run(job_context.run_id, create_compute_log_file_key())
            log_context = capture.enter_context(logs.capture_logs(log_key))
            yield DagsterEvent.capture_logs(job_context, step_keys, log_key, log_context)
            while running or (failure is None and not active.is_complete):
                if failure is None:
                    steps = active.get_steps_to_execute(limit=self.max_concurrent - len(running))
                    yield from active.concurrency_event_iterator(job_context)
                    for step in steps:
                        contexts[step.key] = job_context.for_step(step, active.get_known_state())
                        running[step.key] = []
                        _start(step.key, contexts[step.key], events)
                if not running:
                    active.sleep_til_ready()
                    continue
                try:
                    key, item = events.get(timeout=max(active.sleep_interval(), 0.05))
                except queue.Empty:
                    continue
                if isinstance(item, DagsterEvent):
                    running[key].append(item)
                    yield item
                    active.handle_event(item)
                elif isinstance(item, BaseException):  # raise_on_error: raised after the others
                    failure = failure or item
                elif item is _DONE:
                    step_events = running.pop(key)
                    if failure is None:
                        active.verify_complete(job_context, key)
                        yield from active.plan_events_iterator(job_context)
                        yield from _trigger_hook(contexts.pop(key), step_events)
            if failure is not None:
                raise failure


def _start(key: str, step_context: Any, events: queue.Queue[tuple[str, Any]]) -> None:
    """Start a thread putting the step's events on ``events``, then what it raised, then _DONE."""

    def run() -> None:
        try:
            for event in dagster_event_sequence_for_step(step_context):
                events.put((key, event))
        except BaseException:  # the run's thread raises it (raise_on_error)
            events.put((key, sys.exc_info()[1]))
        finally:
            release_thread_sessions()
            events.put((key, _DONE))

    threading.Thread(target=run, name=f"step {key}", daemon=True).start()


@dg.executor(
    name="threads",
    config_schema={
        "max_concurrent": dg.Field(
            dg.IntSource,
            is_required=False,
            description="Steps run at once (LAKEHOUSE_MAX_CONCURRENT_STEPS, by default 4).",
        ),
        "retries": get_retries_config(),
    },
)
def threaded_executor(init_context: dg.InitExecutorContext) -> ThreadedExecutor:
    """Each step of the run in a thread of the run's process, up to ``max_concurrent`` at once."""
    config = init_context.executor_config
    limit = int(config.get("max_concurrent") or max_concurrent_steps())  # type: ignore[arg-type]
    if limit < 1:
        raise dg.DagsterInvalidConfigError(
            "max_concurrent must be at least 1", [], {"max_concurrent": limit}
        )
    return ThreadedExecutor(RetryMode.from_config(config["retries"]), limit)  # type: ignore[arg-type]


def materialize(
    assets: Sequence[dg.AssetsDefinition],
    selection: dg.AssetSelection,
    resources: Mapping[str, Any],
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    """``dg.materialize`` of ``selection`` with the threaded executor: the run in this process,
    its independent steps at once. (``dg.materialize`` runs one step at a time: it replaces a
    job's executor with the in-process one.)

    Raises:
        Exception: the first a step raised, after the steps running with it have ended (with
            ``raise_on_error``; without, failures are the result's events, as in a launched run).
    """
    job = dg.Definitions(
        assets=list(assets),
        resources=dict(resources),
        executor=threaded_executor,
        jobs=[dg.define_asset_job("__materialize", selection)],
    ).resolve_job_def("__materialize")
    return core_execute_in_process(
        run_config=dict(run_config or {}),
        job=InMemoryJob(job),
        instance=instance,
        output_capturing_enabled=False,
        raise_on_error=raise_on_error,
        run_tags=tags,
    )
