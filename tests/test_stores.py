"""Files and databases that commands keep between runs, changed by several runs at once.

Each concurrency test starts real processes on one file, each doing a counted
number of changes, and checks that every change accepted is there at the end.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from commands import cli, ctrl_c_as_from_a_terminal
from test_story_draft import (
    CHARACTER,
    FINALIZE,
    PREMISE,
    call,
    character,
    premise,
    refused,
    story,
)

from plancontracts import PLANNING_SESSION, decode
from plancontracts.runtime.planning_blocks.commands import _write_session
from plancontracts.runtime.planning_blocks.session import new_session
from plancontracts.runtime.story_packages import DraftStore

HANG = 600
"Seconds after which a process is taken to hang: these runs take a few seconds."

# think --state ---------------------------------------------------------------------------

_STORY_TURNS = """
import sys
from plancontracts.generated.planning_blocks import PlanningBlock
from plancontracts.runtime.planning_blocks import Thought, after_thought
from plancontracts.runtime.planning_blocks.commands import _read_session, _turn, _write_session
from plancontracts.runtime.planning_blocks.session import MINUTE

state, turns = sys.argv[1], int(sys.argv[2])
thought = Thought(PlanningBlock(choices={}), "story", None, "the patrol passes")
for _ in range(turns):
    with _turn(state):  # as think takes each turn
        session = _read_session(state)
        session, _ = after_thought(session, thought, "patrol", elapsed=MINUTE)
        _write_session(state, session)
"""


@pytest.mark.process
def test_runs_taking_turns_on_one_state_file_lose_none(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    runs, turns = 4, 25
    started = [
        subprocess.Popen(
            [sys.executable, "-c", _STORY_TURNS, str(state), str(turns)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(runs)
    ]
    for process in started:
        _, stderr = process.communicate(timeout=HANG)
        assert process.returncode == 0, stderr
    assert decode(PLANNING_SESSION, state.read_bytes()).turn == runs * turns
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".session.json.lock",
        "session.json",
    ]  # no temporary file left


def test_a_link_at_the_state_files_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    victim = tmp_path / "victim"
    victim.write_text("kept")
    (tmp_path / ".session.json.partial").symlink_to(victim)
    _write_session(str(state), new_session())
    assert victim.read_text() == "kept"
    assert decode(PLANNING_SESSION, state.read_bytes()) == new_session()


# story run --db ---------------------------------------------------------------------------


def _story_runs(
    tmp_path: Path, db: Path, batches: list[list[str]], *options: str
) -> list[tuple[int, list[dict[str, Any]], str]]:
    """Run `story run` on each batch of call lines, all at once, each in its own process."""
    started = []
    for index, lines in enumerate(batches):
        calls = tmp_path / f"calls{index}.ndjson"
        calls.write_text("".join(line + "\n" for line in lines))
        command = [sys.executable, "-m", "plancontracts", "story", "run", str(calls)]
        started.append(
            subprocess.Popen(
                [*command, "--db", str(db), *options],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    ran = []
    for process in started:
        stdout, stderr = process.communicate(timeout=HANG)
        ran.append((process.returncode, [json.loads(line) for line in stdout.splitlines()], stderr))
    return ran


def _characters(db: Path, session: str) -> set[str]:
    with DraftStore(db) as store:
        return {character.id for character in store.load_draft(session).characters}


@pytest.mark.process
def test_runs_calling_one_session_at_once_keep_every_call(tmp_path: Path) -> None:
    db = tmp_path / "stories.db"
    first = cli("story", "run", "-", "--db", str(db), stdin=call(PREMISE, premise()) + "\n")
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session"]
    runs, calls = 2, 15  # 30 characters: a draft holds at most 40
    batches = [
        [call(CHARACTER, character(f"run{run}x{index}")) for index in range(calls)]
        for run in range(runs)
    ]
    ran = _story_runs(tmp_path, db, batches, "--session", session)
    for status, records, stderr in ran:
        assert (status, stderr) == (0, "")
        assert [record["ok"] for record in records] == [True] * calls
    expected = {f"run{run}x{index}" for run in range(runs) for index in range(calls)}
    assert _characters(db, session) == expected


@pytest.mark.process
@pytest.mark.slow
def test_runs_on_sessions_of_one_database_at_once_all_succeed(tmp_path: Path) -> None:
    db = tmp_path / "stories.db"
    # Twelve runs of 41 calls: before each call held a write transaction, two or
    # three of them found the database locked (at open, or at the premise's save).
    runs, calls = 12, 40
    batches = [
        [call(PREMISE, premise())]
        + [call(CHARACTER, character(f"run{run}x{index}")) for index in range(calls)]
        for run in range(runs)
    ]
    ran = _story_runs(tmp_path, db, batches)
    for run, (status, records, stderr) in enumerate(ran):
        assert (status, stderr) == (0, "")
        assert [record["ok"] for record in records] == [True] * (calls + 1)
        expected = {f"run{run}x{index}" for index in range(calls)}
        assert _characters(db, records[0]["session"]) == expected


def test_a_finalized_package_the_store_refuses_leaves_no_file(tmp_path: Path) -> None:
    db, out = tmp_path / "stories.db", tmp_path / "packages"
    out.mkdir()
    with DraftStore(db) as store:
        session = story(store=store, packages=out)
        with sqlite3.connect(db) as connection:  # a store that takes no package
            connection.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON packages "
                "BEGIN SELECT RAISE(ABORT, 'no room'); END"
            )
        saved = store.load_draft(session.draft.package_id)
        done = refused(session, FINALIZE, {"title": "The Final Title"})
        assert "no room" in done.message
        assert store.load_draft(session.draft.package_id) == saved
        assert store.sessions() == [session.draft.package_id]
    assert list(out.iterdir()) == []


def test_a_package_file_appears_only_once_the_store_has_committed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the file was there while the commit waited: a run killed then left a
    # package file the database never took.
    db, out = tmp_path / "stories.db", tmp_path / "packages"
    out.mkdir()
    seen: list[list[str]] = []
    commit = DraftStore.commit

    def looking(store: DraftStore) -> None:
        seen.append(sorted(path.name for path in out.iterdir() if not path.name.startswith(".")))
        commit(store)

    with DraftStore(db) as store:
        session = story(store=store, packages=out)
        monkeypatch.setattr(DraftStore, "commit", looking)
        done = session.call(FINALIZE, {"title": "The Final Title"})
        assert done.ok, done.message
        package_id = session.draft.package_id
    assert seen == [[]]  # at the finalize's commit, no package file yet
    assert sorted(path.name for path in out.iterdir()) == [f"{package_id}.json"]


def test_a_state_file_that_is_a_fifo_is_refused_before_any_model(tmp_path: Path) -> None:
    # A FIFO opened for reading waits for a writer: think hung there forever.
    state = tmp_path / "s.json"
    os.mkfifo(state)
    done = cli(
        "think",
        "look around",
        "--state",
        str(state),
        "--no-download",
        env={"PLANCONTRACTS_SERVER": "http://127.0.0.1:9"},
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"plancontracts: error: --state {state}: not a regular file"
    ]


@pytest.mark.process
@pytest.mark.parametrize(("signum", "status"), [(2, 130), (15, 143)])
def test_a_signal_stops_a_run_waiting_for_a_locked_database(
    signum: int, status: int, tmp_path: Path
) -> None:
    import signal
    import time

    db = tmp_path / "stories.db"
    DraftStore(db).close()
    calls = tmp_path / "calls.ndjson"
    calls.write_text(call(PREMISE, premise()) + "\n")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program's transaction, held past the run's wait
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "plancontracts", "story", "run", str(calls), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=ctrl_c_as_from_a_terminal,
        )
        time.sleep(3)  # started, and waiting for the lock (SQLite waited in C for all of it)
        process.send_signal(signal.Signals(signum))
        try:
            _, stderr = process.communicate(timeout=30)  # the wait is 60 s
        finally:
            process.kill()
    finally:
        holder.rollback()
        holder.close()
    assert process.returncode == status, stderr
    assert len(stderr.splitlines()) == 1, stderr  # its one line, no traceback
    with DraftStore(db) as store:
        assert store.sessions() == []  # nothing half-saved
