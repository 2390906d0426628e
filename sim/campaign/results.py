"""The campaign's results directory: `results.jsonl` (a header line, then one line per episode, appended as
batches finish) and `traces/<batch>.npz` (downsampled trajectories for the report, and for robots with sensed feet
the foot contacts at every step).

A re-run reads what is there and skips finished scenarios. A batch's trace file is written before its lines,
so every line's trace exists; a line cut short by a crash is ignored and its scenario runs again.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from edge.fileio import atomic_write_bytes
from sim.campaign.config import CampaignError
from sim.campaign.rollout import TRACE_CHANNELS, BatchResult

RESULTS_FILE = "results.jsonl"
TRACE_DIR = "traces"


class ResultStore:
    def __init__(self, out_dir: str | Path, header: dict, fresh: bool = False):
        """Open (resume) or start the results in `out_dir`. `header` identifies what is simulated (campaign hash,
        policy sha256, backend, robot); results written under another header are refused unless `fresh`."""
        self.dir = Path(out_dir)
        self.path = self.dir / RESULTS_FILE
        self.header = {"type": "header", **header}
        self._rows: dict[str, dict] = {}
        if fresh and self.path.exists():
            self.path.unlink()
            for f in (self.dir / TRACE_DIR).glob("*.npz"):
                f.unlink()
        if self.path.exists():
            self._resume()
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._write([self.header])

    def _resume(self) -> None:
        lines = self.path.read_text().splitlines()
        try:
            found = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            found = None
        if found != self.header:
            diff = (
                "no header"
                if not isinstance(found, dict)
                else ", ".join(k for k in self.header if found.get(k) != self.header[k])
            )
            raise CampaignError(
                f"{self.path} holds results of another run ({diff} differ); pass --fresh to start over or --out "
                "to write elsewhere"
            )
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of an interrupted run
            if row.get("type") == "episode":
                self._rows[row["id"]] = row
        if lines and not self.path.read_bytes().endswith(b"\n"):
            with open(self.path, "ab") as f:  # start the next line on a fresh one
                f.write(b"\n")

    def _write(self, records: list[dict]) -> None:
        data = "".join(json.dumps(r, allow_nan=False) + "\n" for r in records).encode()
        with open(self.path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    @property
    def done(self) -> set[str]:
        return set(self._rows)

    def rows(self) -> list[dict]:
        return list(self._rows.values())

    def append(self, result: BatchResult) -> None:
        """Store a finished batch (only its scenarios not stored yet)."""
        buf = io.BytesIO()
        # Any: numpy's annotation would also match these keyword arrays against savez_compressed's allow_pickle
        feet: dict[str, Any] = (
            {} if result.contacts is None else {"contacts": result.contacts, "feet": np.array(result.feet)}
        )
        np.savez_compressed(buf, trace=result.trace, channels=np.array(TRACE_CHANNELS), **feet)
        atomic_write_bytes(self.dir / TRACE_DIR / f"{result.key}.npz", buf.getvalue())
        new = [r for r in result.rows if r["id"] not in self._rows]
        self._write(new)
        self._rows.update({r["id"]: r for r in new})

    def trace(self, row: dict) -> dict[str, np.ndarray]:
        """The stored trajectory of one episode row: channel -> (points,) array; with contacts, also
        "foot_contact" (steps, feet) bool and "feet" (their names)."""
        with np.load(self.dir / TRACE_DIR / f"{row['batch']}.npz") as data:
            values = data["trace"][row["trace_index"]]
            out = {str(c): values[:, i] for i, c in enumerate(data["channels"])}
            if "contacts" in data:
                out["foot_contact"] = data["contacts"][row["trace_index"]]
                out["feet"] = data["feet"]
            return out
