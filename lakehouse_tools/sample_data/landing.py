"""The sample's landing files: CSV snapshots of ``registered_users`` and daily ``gym_logins``
(with malformed rows), written atomically."""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from lakehouse_assets.constants import LANDING_DIR
from lakehouse_assets.fitness.names import (
    LANDING_COLUMNS,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
)
from lakehouse_tools.sample_data.model import (
    CORRECTION_RATE,
    DAY_S,
    DEVICE_ID_OFFSET,
    MINUTE_S,
    OVERLAP_RATE,
    REREGISTRATION_RATE,
    LandingFile,
    Visit,
    bad_count,
    count_at,
    epoch,
    mac_address,
    registered_at,
)
from resources.files import write_text


def _csv_text(header: Sequence[str], rows: list[list[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _with_bad_rows(
    rng: random.Random, rows: list[list[object]], kinds: list[tuple[int, str]], rate: float
) -> list[list[object]]:
    """``rows`` with malformed copies inserted: each kind sets one column to a bad value."""
    out = rows[:]
    for n in range(bad_count(rate, len(kinds), len(rows))):
        column, bad = kinds[n % len(kinds)]
        row = rng.choice(rows)[:]
        row[column] = bad
        out.insert(rng.randint(0, len(out)), row)
    return out


def _landing(source: str, stamp: str, rows: list[list[object]]) -> LandingFile:
    return LandingFile(source, f"{source}-{stamp}.csv", _csv_text(LANDING_COLUMNS[source], rows))


def registration_files(
    rng: random.Random, users: int, first_day: date, days: int, rate: float
) -> list[LandingFile]:
    """The registry snapshot on the first day; a few users registering again on the last day."""

    def row(user_id: int, at: int) -> list[object]:
        return [user_id, user_id + DEVICE_ID_OFFSET, mac_address(user_id), at]

    last_day = first_day + timedelta(days=days - 1)
    snapshot = [row(uid, registered_at(uid)) for uid in range(1, users + 1)]
    again_ids = sorted(rng.sample(range(1, users + 1), count_at(REREGISTRATION_RATE, users)))
    again = [row(uid, epoch(last_day) + rng.randrange(DAY_S)) for uid in again_ids]
    bad_kinds = [(0, "u-17"), (2, "")]  # a non-numeric user id, a missing mac address
    return [
        _landing(
            LANDING_REGISTERED_USERS,
            f"{first_day}-1",
            _with_bad_rows(rng, snapshot, bad_kinds, rate),
        ),
        _landing(LANDING_REGISTERED_USERS, f"{last_day}-2", again),
    ]


def gym_files(
    rng: random.Random, visits: list[Visit], first_day: date, days: int, rate: float
) -> list[LandingFile]:
    """One file per day, some visits logged in twice; corrected logouts in a later file."""
    twins = []
    for mac, gym, login, logout in rng.sample(visits, count_at(OVERLAP_RATE, len(visits))):
        second = login + rng.randrange(5 * MINUTE_S, 30 * MINUTE_S)
        later = logout + rng.randrange(-5 * MINUTE_S, 20 * MINUTE_S)
        twins.append((mac, gym, second, max(second + 5 * MINUTE_S, later)))
    corrected = [
        [mac, gym, login, logout + rng.randrange(5 * MINUTE_S, 45 * MINUTE_S)]
        for mac, gym, login, logout in rng.sample(visits, count_at(CORRECTION_RATE, len(visits)))
    ]
    by_day: dict[date, list[list[object]]] = {}
    for visit in sorted(visits + twins, key=lambda v: v[2]):
        by_day.setdefault(datetime.fromtimestamp(visit[2], UTC).date(), []).append(list(visit))
    bad_kinds = [(2, "09:15"), (3, "")]  # a non-numeric login, a missing logout
    last_day = first_day + timedelta(days=days - 1)
    files = [
        _landing(LANDING_GYM_LOGINS, f"{day}-1", _with_bad_rows(rng, rows, bad_kinds, rate))
        for day, rows in sorted(by_day.items())
    ]
    return [*files, _landing(LANDING_GYM_LOGINS, f"{last_day}-2", corrected)]


def write_landing(root: str | Path, files: list[LandingFile]) -> None:
    """Write each file to ``<root>/landing/<source>/<name>`` (a folder or an object store's URI),
    whole: the text goes to a hidden file first (Spark's file source skips names starting with
    "."), then takes its name, so a reader never sees half a file (``resources.files``)."""
    for landing_file in files:
        uri = f"{root}/{LANDING_DIR}/{landing_file.source}/{landing_file.name}"
        write_text(uri, landing_file.text)
