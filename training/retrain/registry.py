"""The lineage registry (SQLite): which field logs led to which identified parameters, training run, artifact
(by the sha256 of its policy.onnx) and campaign reports, which artifact is deployed, and the journal that makes
log processing exactly-once.

Journal: a log (keyed by the sha256 of its bytes, so a copy under another name is the same log) is claimed by
one retraining before it is processed and marked done after; a claimed-but-not-done log (a crash in between)
is picked up again by the next run and finishes under the same retraining id. Every change is one SQLite
transaction, so a crash leaves the registry before or after it, never between.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from training.errors import TrainingError


@dataclass(frozen=True)
class CampaignRecord:
    """A campaign run on an artifact, as the registry keeps it: its verdict and where its report is."""

    kind: str  # standard | identified-twin
    name: str
    passed: bool
    summary_path: Path
    report_path: Path
    summary_sha256: str  # of summary_path, as the campaign wrote it


DEFAULT_REGISTRY = Path("runs") / "registry.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS retrains (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    out_dir TEXT NOT NULL,
    parent_sha256 TEXT NOT NULL,        -- the deployed artifact the logs came from
    logs TEXT,                           -- JSON [{path, sha256}] of every log it read
    triggered INTEGER,
    reason TEXT,
    identified TEXT,                     -- JSON {param: value}
    sysid TEXT,                          -- JSON: errors before/after, steps replayed
    training_run TEXT,                   -- run directory of the fine-tuning
    new_sha256 TEXT,
    promoted INTEGER,
    promotion_reason TEXT,
    signed_by TEXT                       -- id of the key that signed the promoted artifact (edge.signing)
);
CREATE TABLE IF NOT EXISTS logs (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('claimed', 'done')),
    retrain_id INTEGER NOT NULL REFERENCES retrains(id),
    claimed_at TEXT NOT NULL,
    claimed_by INTEGER NOT NULL,         -- pid
    done_at TEXT
);
CREATE TABLE IF NOT EXISTS artifacts (
    sha256 TEXT PRIMARY KEY,             -- of policy.onnx
    path TEXT NOT NULL,
    robot TEXT,
    training_run_id TEXT,
    training_run_dir TEXT,
    parent_sha256 TEXT,                  -- the artifact it was fine-tuned from
    retrain_id INTEGER REFERENCES retrains(id),
    registered_at TEXT NOT NULL,
    deployed INTEGER NOT NULL DEFAULT 0,
    deployed_at TEXT
);
CREATE TABLE IF NOT EXISTS campaigns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    artifact_sha256 TEXT NOT NULL,
    retrain_id INTEGER REFERENCES retrains(id),
    kind TEXT NOT NULL,                  -- 'standard' or 'identified-twin'
    name TEXT NOT NULL,
    passed INTEGER NOT NULL,
    summary_path TEXT NOT NULL,
    report_path TEXT NOT NULL,
    summary_sha256 TEXT NOT NULL,
    UNIQUE (artifact_sha256, retrain_id, kind)
);
"""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Registry:
    def __init__(self, path: str | Path = DEFAULT_REGISTRY):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode: transactions are explicit (BEGIN IMMEDIATE), so a claim is read-check-write atomically
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)  # CREATE ... IF NOT EXISTS: a no-op on an existing registry
        columns = {row["name"] for row in self.db.execute("PRAGMA table_info(retrains)")}
        if "signed_by" not in columns:  # a registry from before signatures
            self.db.execute("ALTER TABLE retrains ADD COLUMN signed_by TEXT")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ------------------------------------------------------------------ journal
    def begin(self, out_dir: Path, parent_sha256: str) -> int:
        """The retraining writing to out_dir (a resumed or repeated one-shot run), or a new one."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT id FROM retrains WHERE out_dir = ? ORDER BY id DESC LIMIT 1", (str(out_dir),)
            ).fetchone()
            if row is not None:
                return int(row["id"])
            return int(
                db.execute(
                    "INSERT INTO retrains (started_at, out_dir, parent_sha256) VALUES (?, ?, ?)",
                    (now(), str(out_dir), parent_sha256),
                ).lastrowid
            )

    def claim(self, logs: list[tuple[str, Path, int]], out_root: Path, parent_sha256: str) -> int | None:
        """Claim, for one new retraining writing to out_root/retrain-<id>, the logs (sha256, path, size) no
        retraining has claimed yet; returns its id, or None when every log was already claimed or done."""
        with self.transaction() as db:
            known = {
                r["sha256"]
                for r in db.execute(
                    f"SELECT sha256 FROM logs WHERE sha256 IN ({','.join('?' * len(logs))})", [s for s, _, _ in logs]
                )
            }
            fresh = [(s, p, n) for s, p, n in logs if s not in known]
            if not fresh:
                return None
            rid = db.execute(
                "INSERT INTO retrains (started_at, out_dir, parent_sha256) VALUES (?, '', ?)", (now(), parent_sha256)
            ).lastrowid
            db.execute("UPDATE retrains SET out_dir = ? WHERE id = ?", (str(out_root / f"retrain-{rid:04d}"), rid))
            self._journal(db, rid, fresh)
        return int(rid)

    def journal(self, retrain_id: int, logs: list[tuple[str, Path, int]]) -> None:
        """Enter logs a one-shot retraining reads (those not in the journal yet) as claimed by it."""
        with self.transaction() as db:
            self._journal(db, retrain_id, logs)

    @staticmethod
    def _journal(db: sqlite3.Connection, retrain_id: int, logs: list[tuple[str, Path, int]]) -> None:
        db.executemany(
            "INSERT OR IGNORE INTO logs (sha256, path, size, state, retrain_id, claimed_at, claimed_by) "
            "VALUES (?, ?, ?, 'claimed', ?, ?, ?)",
            [(s, str(p), n, retrain_id, now(), os.getpid()) for s, p, n in logs],
        )

    def unfinished(self) -> list[dict]:
        """Retrainings with claimed-but-not-done logs (interrupted), oldest first, each with its logs."""
        rows = self.db.execute(
            "SELECT retrain_id, path, sha256 FROM logs WHERE state = 'claimed' ORDER BY retrain_id, path"
        ).fetchall()
        out: dict[int, dict] = {}
        for r in rows:
            entry = out.setdefault(r["retrain_id"], {**self.retrain(r["retrain_id"]), "claimed": []})
            entry["claimed"].append({"path": r["path"], "sha256": r["sha256"]})
        return list(out.values())

    def log_state(self, sha256: str) -> str | None:
        row = self.db.execute("SELECT state FROM logs WHERE sha256 = ?", (sha256,)).fetchone()
        return row["state"] if row else None

    def record(self, retrain_id: int, **fields) -> None:
        """Store what a retraining found so far (columns of the retrains table)."""
        columns = {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in fields.items()}
        with self.transaction() as db:
            db.execute(
                f"UPDATE retrains SET {', '.join(f'{k} = ?' for k in columns)} WHERE id = ?",
                [*columns.values(), retrain_id],
            )

    def finish(self, retrain_id: int) -> None:
        """The retraining is complete: stamp it and mark its logs done, in one transaction."""
        with self.transaction() as db:
            db.execute("UPDATE retrains SET finished_at = COALESCE(finished_at, ?) WHERE id = ?", (now(), retrain_id))
            db.execute(
                "UPDATE logs SET state = 'done', done_at = ? WHERE retrain_id = ? AND state = 'claimed'",
                (now(), retrain_id),
            )

    # ------------------------------------------------------------------ lineage records
    def add_artifact(
        self,
        sha256: str,
        path: Path,
        robot: str | None,
        training_run_id: str | None,
        training_run_dir: Path | None,
        parent_sha256: str | None = None,
        retrain_id: int | None = None,
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO artifacts (sha256, path, robot, training_run_id, training_run_dir, parent_sha256, "
                "retrain_id, registered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256) DO UPDATE SET "
                "path = excluded.path, training_run_dir = COALESCE(excluded.training_run_dir, training_run_dir), "
                "parent_sha256 = COALESCE(excluded.parent_sha256, parent_sha256), "
                "retrain_id = COALESCE(excluded.retrain_id, retrain_id)",
                (
                    sha256,
                    str(path),
                    robot,
                    training_run_id,
                    str(training_run_dir) if training_run_dir else None,
                    parent_sha256,
                    retrain_id,
                    now(),
                ),
            )

    def add_campaign(self, artifact_sha256: str, retrain_id: int | None, campaign: CampaignRecord) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO campaigns (artifact_sha256, retrain_id, kind, name, passed, "
                "summary_path, report_path, summary_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    artifact_sha256,
                    retrain_id,
                    campaign.kind,
                    campaign.name,
                    int(campaign.passed),
                    str(campaign.summary_path),
                    str(campaign.report_path),
                    campaign.summary_sha256,
                ),
            )

    def mark_deployed(self, sha256: str, robot: str | None) -> None:
        """`sha256` becomes the deployed artifact of its robot (the one it replaces is no longer deployed)."""
        with self.transaction() as db:
            db.execute("UPDATE artifacts SET deployed = 0 WHERE robot IS ? AND sha256 != ?", (robot, sha256))
            db.execute("UPDATE artifacts SET deployed = 1, deployed_at = ? WHERE sha256 = ?", (now(), sha256))

    # ------------------------------------------------------------------ queries
    def artifact(self, sha256_or_prefix: str) -> dict | None:
        rows = self.db.execute("SELECT * FROM artifacts WHERE sha256 LIKE ?", (sha256_or_prefix + "%",)).fetchall()
        if len(rows) > 1:
            raise TrainingError(f"artifact prefix {sha256_or_prefix!r} matches {len(rows)} artifacts; give more digits")
        return dict(rows[0]) if rows else None

    def retrain(self, retrain_id: int) -> dict:
        row = self.db.execute("SELECT * FROM retrains WHERE id = ?", (retrain_id,)).fetchone()
        if row is None:
            return {}
        d = dict(row)
        for k in ("identified", "sysid", "logs"):
            d[k] = json.loads(d[k]) if d[k] else None
        return d

    def logs_of(self, retrain_id: int) -> list[dict]:
        return [
            dict(r) for r in self.db.execute("SELECT * FROM logs WHERE retrain_id = ? ORDER BY path", (retrain_id,))
        ]

    def campaigns_of(self, sha256: str) -> list[dict]:
        return [
            dict(r) for r in self.db.execute("SELECT * FROM campaigns WHERE artifact_sha256 = ? ORDER BY id", (sha256,))
        ]

    def deployed(self, robot: str) -> dict | None:
        row = self.db.execute("SELECT * FROM artifacts WHERE robot = ? AND deployed = 1", (robot,)).fetchone()
        return dict(row) if row else None

    def lineage(self, sha256_or_prefix: str) -> list[dict]:
        """The chain that produced an artifact, newest first: for each artifact, its campaigns, the training run,
        the identified parameters and the logs of the retraining that made it, then its parent artifact."""
        chain, seen = [], set()
        current = self.artifact(sha256_or_prefix)
        if current is None:
            return []
        while current is not None and current["sha256"] not in seen:
            seen.add(current["sha256"])
            entry = {"artifact": current, "campaigns": self.campaigns_of(current["sha256"])}
            if current["retrain_id"] is not None:
                entry["retrain"] = self.retrain(current["retrain_id"])
                entry["logs"] = self.logs_of(current["retrain_id"])
            chain.append(entry)
            current = self.artifact(current["parent_sha256"]) if current["parent_sha256"] else None
        return chain
