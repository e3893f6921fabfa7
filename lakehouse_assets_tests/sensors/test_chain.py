"""What a stream's run takes with it (``sensors/chain.py``), on the project's own asset graph: the
chains below are read off the graph drawn in docs/how_it_works.md, by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from lakehouse_assets.definitions import defs, lakehouse_definitions
from lakehouse_assets.sensors.chain import automation_window, chain_request, following
from lakehouse_assets.sources.declaration.files import load_declarations

GRAPH = defs.get_repository_def().asset_graph
REPO_ROOT = Path(__file__).resolve().parents[2]


def keys(*names: str) -> list[dg.AssetKey]:
    return [dg.AssetKey(name.split("/")) for name in names]


def chain(root: str, not_ready: tuple[str, ...] = ()) -> list[dg.AssetKey]:
    held = set(keys(*not_ready))
    return following(GRAPH, dg.AssetKey(root.split("/")), lambda key: key not in held)


def test_a_stream_takes_what_follows_it_to_gold() -> None:
    assert chain("bronze/bpm") == keys(
        "bronze/bpm", "silver/bpm_quarantine", "silver/heart_rate", "silver/workout_bpm",
        "gold/workout_bpm_summary",
    )  # fmt: skip
    assert chain("bronze/gym_logins") == keys(
        "bronze/gym_logins", "silver/gym_logins_quarantine", "silver/gym_logs", "gold/gym_summary"
    )
    workout = chain("bronze/workout")
    assert set(workout) == set(keys(
        "bronze/workout", "silver/workout_quarantine", "silver/workouts",
        "silver/completed_workouts", "silver/workout_bpm", "gold/gym_summary",
        "gold/workout_bpm_summary",
    ))  # fmt: skip
    # Each after what it reads.
    order = {key: n for n, key in enumerate(workout)}
    for key in workout[1:]:
        assert all(order[p] < order[key] for p in GRAPH.get(key).parent_keys if p in order)


def test_a_table_whose_other_upstream_is_not_ready_is_left_to_automation() -> None:
    # The first run of a stream: nothing else exists yet.
    everything = tuple(key.to_user_string() for key in GRAPH.get_all_asset_keys())
    assert chain("bronze/workout", not_ready=everything) == keys(
        "bronze/workout", "silver/workout_quarantine", "silver/workouts",
        "silver/completed_workouts",
    )  # fmt: skip
    # silver/users failed a blocking check: neither its gold nor workout_bpm follows, nor
    # workout_bpm's gold, which then has no upstream in the run.
    assert chain("bronze/workout", not_ready=("silver/users",)) == keys(
        "bronze/workout", "silver/workout_quarantine", "silver/workouts",
        "silver/completed_workouts",
    )  # fmt: skip


def test_gold_is_taken_for_the_days_automation_keeps() -> None:
    today = datetime.now(UTC).date()
    assert automation_window() == ((today - timedelta(days=6)).isoformat(), today.isoformat())
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=defs)
        # A sensor whose stream has never run: no gold, so no days.
        first = chain_request(context, dg.AssetKey(["bronze", "bpm"]), {"t": "1"})
        assert first.asset_selection == keys("bronze/bpm", "silver/bpm_quarantine",
                                              "silver/heart_rate")  # fmt: skip
        assert first.tags == {"t": "1"}
        for key in GRAPH.get_all_asset_keys():
            if GRAPH.get(key).partitions_def is None:
                instance.report_runless_asset_event(dg.AssetMaterialization(key))
        later = chain_request(context, dg.AssetKey(["bronze", "bpm"]), {"t": "1"})
        assert later.asset_selection == chain("bronze/bpm")
        first_day, last_day = automation_window() or ("", "")
        assert later.tags == {
            "t": "1",
            "dagster/asset_partition_range_start": first_day,
            "dagster/asset_partition_range_end": last_day,
        }


def test_a_sensor_outside_a_code_location_runs_its_stream_alone() -> None:
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance)
        request = chain_request(context, dg.AssetKey(["bronze", "bpm"]), {})
        assert request.asset_selection == keys("bronze/bpm")


def test_a_step_that_writes_more_than_the_chain_would_take_is_left_to_automation() -> None:
    """The document router of docs/sources/commcare.yaml writes tables fed by two streams in one
    step: neither stream's run can take part of it, so both run their bronze alone."""
    sources, errors = load_declarations(REPO_ROOT / "docs" / "sources")
    assert errors == []
    repository = lakehouse_definitions(sources).get_repository_def()
    graph = repository.asset_graph
    assert following(graph, dg.AssetKey(["bronze", "commcare"]), lambda _: True) == keys(
        "bronze/commcare"
    )
    for key in graph.get_all_asset_keys():
        if key.path[0] == "bronze":  # every stream's run is a job Dagster can build
            chain = following(graph, key, lambda _: True)
            repository.get_maybe_subset_job_def("__ASSET_JOB", asset_selection=set(chain))
