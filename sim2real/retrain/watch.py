"""`sim2real retrain --watch DIR`: retrain as finalised field logs arrive, each log exactly once.

A log counts as finalised when it sits in a rosbag2 directory with its metadata.yaml (field_recorder moves a
segment out of .partial/ only once it is closed; `ros2 bag record` writes metadata.yaml on close) or, for a
bare file (.mcap, ROS 1 .bag), when its size and modification time have not changed for the debounce time. New
logs are batched until none has arrived for the debounce time, then claimed in the registry's journal (by sha256) and
processed as one retraining. On start, retrainings whose logs are claimed but not done (a crash) are finished
first, in their own output directories, where every completed stage is skipped.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edge.config import setting
from edge.fileio import sha256_file
from sim2real.pipeline import Progress
from sim2real.retrain.pipeline import RetrainRequest, RetrainResult, retrain
from training.retrain.ingest import log_files
from training.retrain.registry import Registry


@dataclass
class WatchConfig:
    """How `watch` batches the logs and when it stops."""

    debounce_s: float = setting(2.0, "seconds without a new log before a batch starts", ge=0)
    poll_s: float = setting(0.5, "seconds between two looks at the directory", gt=0)
    idle_exit_s: float | None = setting(None, "stop after this many seconds with nothing new (none: watch on)", ge=0)
    max_batches: int | None = setting(None, "stop after this many retrainings (none: no limit)", ge=1)


class LogScanner:
    """Finalised field logs under a directory, with their sha256 (hashed once per file version)."""

    def __init__(self, root: Path, debounce_s: float):
        self.root, self.debounce_s = Path(root), debounce_s
        self._stat: dict[Path, tuple[int, int, float]] = {}  # path -> (size, mtime_ns, first seen like this)
        self._sha: dict[tuple[Path, int, int], str] = {}

    def finalised(self) -> list[tuple[str, Path, int]]:
        now, out = time.monotonic(), []
        for path in log_files(self.root) if self.root.is_dir() else []:
            try:
                st = path.stat()
            except FileNotFoundError:  # moved away between the listing and now
                continue
            size, mtime = st.st_size, st.st_mtime_ns
            known = self._stat.get(path)
            if known is None or known[:2] != (size, mtime):
                self._stat[path] = (size, mtime, now)
                known = self._stat[path]
            closed = (path.parent / "metadata.yaml").is_file() or now - known[2] >= self.debounce_s
            if closed and size > 0:
                key = (path, size, mtime)
                if key not in self._sha:
                    self._sha[key] = sha256_file(path)
                out.append((self._sha[key], path, size))
        return out


def watch(
    root: Path,
    request: RetrainRequest,
    cfg: WatchConfig | None = None,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> list[RetrainResult]:
    """Process finalised logs under `root` as they arrive; returns the retrainings this call completed. `request`
    holds what every retraining shares: its artifact is the one deployed when no retraining has promoted one yet,
    its out_dir the root of the retrainings' directories, its registry the journal of claimed logs (required)."""
    from edge.manifest import load_manifest

    cfg = cfg or WatchConfig()
    root, out_root, artifact, registry = Path(root), Path(request.out_dir), Path(request.artifact), request.registry

    def run(logs: list[Path], parent: Path, out_dir: Path, retrain_id: int) -> RetrainResult:
        job = dataclasses.replace(request, logs=tuple(logs), artifact=parent, out_dir=out_dir, retrain_id=retrain_id)
        return retrain(job, progress, log=say)

    robot = load_manifest(artifact).robot["name"]
    done: list[RetrainResult] = []
    with Registry(registry) as reg:
        unfinished = reg.unfinished()
    for entry in unfinished:  # interrupted retrainings first, exactly where they stopped
        parent = _artifact_path(registry, entry["parent_sha256"]) or Path(artifact)
        say(f"resuming retraining {entry['id']} of {len(entry['claimed'])} claimed log(s) in {entry['out_dir']}")
        done.append(run([Path(e["path"]) for e in entry["claimed"]], parent, Path(entry["out_dir"]), entry["id"]))
    scanner = LogScanner(root, cfg.debounce_s)
    pending: set[str] = set()
    changed = idle_since = time.monotonic()
    say(f"watching {root} for finalised field logs (debounce {cfg.debounce_s:g} s)")
    while cfg.max_batches is None or len(done) < cfg.max_batches:
        with Registry(registry) as reg:
            new = [(s, p, n) for s, p, n in scanner.finalised() if reg.log_state(s) is None]
        now = time.monotonic()
        if {s for s, _, _ in new} != pending:
            pending, changed = {s for s, _, _ in new}, now
        if new and now - changed >= cfg.debounce_s:
            current = _deployed(registry, robot) or Path(artifact)
            with Registry(registry) as reg:
                rid = reg.claim(new, out_root, load_manifest(current).policy["sha256"])
                out_dir = Path(reg.retrain(rid)["out_dir"]) if rid is not None else None
            if rid is not None:
                say(f"retraining {rid}: {len(new)} new log(s): " + ", ".join(p.name for _, p, _ in new))
                done.append(run([p for _, p, _ in new], current, out_dir, rid))
            pending, idle_since = set(), time.monotonic()
            continue
        if new:
            idle_since = now
        elif cfg.idle_exit_s is not None and now - idle_since >= cfg.idle_exit_s:
            break
        time.sleep(cfg.poll_s)
    return done


def _artifact_path(registry: Path, sha256: str) -> Path | None:
    with Registry(registry) as reg:
        row = reg.artifact(sha256)
    return Path(row["path"]) if row and Path(row["path"], "policy.onnx").is_file() else None


def _deployed(registry: Path, robot: str) -> Path | None:
    """The artifact in service: the last one promoted (its logs are the ones arriving now)."""
    with Registry(registry) as reg:
        row = reg.deployed(robot)
    return Path(row["path"]) if row and Path(row["path"], "policy.onnx").is_file() else None
