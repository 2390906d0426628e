"""The preference store (SQLite): candidate pairs and the preferences people, the simulated operator or field-log
ratings give them.

pairs: one instruction, two plans (the model's text), each plan's executed trajectory in the twin (for the page's
plot), and the intent when known (generated instructions; the simulated operator needs it): the `expect` column
holds the totals' ranges and, in its "steps" key, the ranges of each step (rows written before steps existed have
none and are judged by their totals).
preferences: pair, choice ('a' or 'b'), rater, source ('human', 'simulated', 'field').

Field-log ratings (JSONL, one executed plan per line, see docs/rlhf.md):
  {"instruction": str, "plan": [{"vx":..,"vy":..,"wz":..,"duration_s":..}, ...], "rating": 1..5,
   "state": str (optional), "rater": str (optional), "log": "path/to/segment.mcap" (optional)}
Plans rated for the same instruction (and state) become pairs; the higher rating is preferred, equal ratings
give no pair.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from edge.instruct.plan import PlanError, format_plan, plan_from_dicts
from edge.instruct.prompt import state_summary
from training.errors import TrainingError
from training.rlhf.intent import Expect, Steps

SOURCES = ("human", "simulated", "field")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS pairs (
  id INTEGER PRIMARY KEY, instruction TEXT NOT NULL, state TEXT NOT NULL, expect TEXT,
  plan_a TEXT NOT NULL, plan_b TEXT NOT NULL, exec_a TEXT, exec_b TEXT, origin TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS preferences (
  id INTEGER PRIMARY KEY, pair_id INTEGER NOT NULL REFERENCES pairs(id),
  choice TEXT NOT NULL CHECK (choice IN ('a', 'b')), rater TEXT NOT NULL, source TEXT NOT NULL, created REAL NOT NULL);
"""


@dataclass
class Pair:
    id: int
    instruction: str
    state: str
    expect: Expect | None
    plan_a: str
    plan_b: str
    exec_a: dict | None  # {"metrics": {...}, "path": [[x, y, yaw], ...]}
    exec_b: dict | None
    steps: Steps | None = None
    origin: str = "model"  # model (sampled for a corpus instruction), typed (by a rater on the page), field


@dataclass
class Preference:
    instruction: str
    state: str
    chosen: str
    rejected: str


class PreferenceStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # a connection per operation: the page serves requests from a thread pool
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:
                yield db
        finally:
            db.close()

    def add_pair(
        self,
        instruction: str,
        state: str,
        plans: tuple[str, str],
        executions: tuple[dict | None, dict | None] = (None, None),
        expect: Expect | None = None,
        origin: str = "model",
        steps: Steps | None = None,
    ) -> int:
        """A pair of plans for the instruction (plan a, plan b) and, for the page, what each did in the twin."""
        (plan_a, plan_b), (exec_a, exec_b) = plans, executions
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO pairs (instruction, state, expect, plan_a, plan_b, exec_a, exec_b, origin, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    instruction,
                    state,
                    None if expect is None else json.dumps({**expect, **({} if steps is None else {"steps": steps})}),
                    plan_a,
                    plan_b,
                    _dump(exec_a),
                    _dump(exec_b),
                    origin,
                    time.time(),
                ),
            )
            return int(cur.lastrowid)

    def add_preference(self, pair_id: int, choice: str, rater: str, source: str) -> int:
        if choice not in ("a", "b") or source not in SOURCES:
            raise ValueError(f"choice must be 'a' or 'b' and source one of {', '.join(SOURCES)}")
        with self._db() as db:
            if db.execute("SELECT 1 FROM pairs WHERE id = ?", (pair_id,)).fetchone() is None:
                raise KeyError(f"no pair {pair_id}")
            cur = db.execute(
                "INSERT INTO preferences (pair_id, choice, rater, source, created) VALUES (?, ?, ?, ?, ?)",
                (pair_id, choice, rater, source, time.time()),
            )
            return int(cur.lastrowid)

    def pair(self, pair_id: int) -> Pair | None:
        with self._db() as db:
            row = db.execute("SELECT * FROM pairs WHERE id = ?", (pair_id,)).fetchone()
        return None if row is None else _pair(row)

    def next_unrated(self, source: str = "human", after: int = 0) -> Pair | None:
        """The oldest pair after id `after` without a preference from this source."""
        with self._db() as db:
            row = db.execute(
                "SELECT * FROM pairs WHERE id > ? AND id NOT IN "
                "(SELECT pair_id FROM preferences WHERE source = ?) ORDER BY id LIMIT 1",
                (after, source),
            ).fetchone()
        return None if row is None else _pair(row)

    def pairs(self) -> list[Pair]:
        with self._db() as db:
            return [_pair(r) for r in db.execute("SELECT * FROM pairs ORDER BY id")]

    def preferences(self) -> list[Preference]:
        """Every stored preference as (chosen, rejected) plan texts; a pair rated twice counts twice."""
        with self._db() as db:
            rows = db.execute(
                "SELECT p.instruction, p.state, p.plan_a, p.plan_b, f.choice FROM preferences f "
                "JOIN pairs p ON p.id = f.pair_id ORDER BY f.id"
            ).fetchall()
        return [Preference(i, s, a if c == "a" else b, b if c == "a" else a) for i, s, a, b, c in rows]

    def counts(self) -> dict[str, int]:
        with self._db() as db:
            out = {"pairs": db.execute("SELECT COUNT(*) FROM pairs").fetchone()[0]}
            for source, n in db.execute("SELECT source, COUNT(*) FROM preferences GROUP BY source"):
                out[source] = n
        return out

    def import_field_ratings(self, path: str | Path, rater: str = "field") -> int:
        """Pairs and preferences from a field-log ratings JSONL file; returns the number of preferences added."""
        groups: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
        p = Path(path)
        if not p.is_file():
            raise TrainingError(f"ratings file {p} does not exist")
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rating = row["rating"]
                if not isinstance(rating, int) or isinstance(rating, bool) or not 1 <= rating <= 5:
                    raise ValueError("rating must be an integer 1..5")
                if not isinstance(row["instruction"], str):
                    raise ValueError("instruction must be a string")
                plan = format_plan(plan_from_dicts(row["plan"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, PlanError) as e:
                raise TrainingError(f"{p}:{n}: {e.__class__.__name__}: {e}") from None
            key = (row["instruction"], str(row.get("state") or state_summary()))
            groups.setdefault(key, []).append((rating, plan, str(row.get("rater") or rater)))
        added = 0
        for (instruction, state), rated in groups.items():
            for (ra, pa, who), (rb, pb, _) in itertools.combinations(rated, 2):
                if ra == rb or pa == pb:
                    continue
                pair_id = self.add_pair(instruction, state, (pa, pb), origin="field")
                self.add_preference(pair_id, "a" if ra > rb else "b", who, "field")
                added += 1
        return added


def _dump(value: dict | None) -> str | None:
    return None if value is None else json.dumps(value)


def _pair(row: tuple) -> Pair:
    pid, instruction, state, expect, plan_a, plan_b, exec_a, exec_b, origin, _created = row
    exp = _load(expect) or {}
    steps = exp.pop("steps", None)
    return Pair(
        pid,
        instruction,
        state,
        {k: tuple(v) for k, v in exp.items()} if exp else None,
        plan_a,
        plan_b,
        _load(exec_a),
        _load(exec_b),
        None if steps is None else tuple({k: tuple(v) for k, v in e.items()} for e in steps),
        origin,
    )


def _load(value: str | None):
    return None if value is None else json.loads(value)
