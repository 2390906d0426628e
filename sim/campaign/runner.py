"""A whole campaign: verify the artifact, run the scenarios not yet in the results (resume), gate, write the
JSON summary and HTML report, optionally compare with a second artifact, and record the verdict in the
artifact's manifest."""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from edge.fileio import atomic_write_bytes, sha256_bytes
from edge.manifest import load_manifest, record_verdict
from edge.signing import public_path, sign_artifact, verify_if_promoted
from sim.campaign.compare import compare
from sim.campaign.config import CampaignConfig
from sim.campaign.execute import Executor
from sim.campaign.gates import evaluate
from sim.campaign.matrix import batches
from sim.campaign.promotion import make_verdict
from sim.campaign.report import render
from sim.campaign.results import ResultStore
from sim.campaign.rollout import ArtifactFiles, check_compatible
from sim.campaign.summary import summarize
from sim.robot import RobotSpec, load_robot

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
COMPARE_FILE = "compare.json"

Progress = Callable[[int, int], None]  # (episodes done, episodes in the campaign)


@dataclass
class CampaignOutcome:
    summary: dict
    out_dir: Path
    verdict: dict | None  # what was written into the manifest (None with promote=False)
    comparison: dict | None
    env_steps: int  # simulated by this invocation (0 when everything was resumed)
    sim_seconds: float  # wall time of those batches

    @property
    def passed(self) -> bool:
        return bool(self.summary["passed"])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _simulate(
    artifact_dir: Path,
    files: ArtifactFiles,
    cfg: CampaignConfig,
    out_dir: Path,
    executor: Executor,
    fresh: bool,
    progress: Progress | None,
) -> tuple[ResultStore, RobotSpec, int, float]:
    manifest = load_manifest(artifact_dir)
    spec = load_robot(cfg.robot or manifest.robot["name"])
    check_compatible(manifest, spec)
    header = {
        "campaign": cfg.name,
        "campaign_sha256": cfg.sim_sha256(),
        "policy_sha256": files.sha256,
        "robot": spec.name,
        "backend": cfg.backend,
    }
    store = ResultStore(out_dir, header, fresh=fresh)
    jobs = batches(cfg)
    total = sum(len(j.scenarios) for j in jobs)
    done = store.done
    todo = [j for j in jobs if any(s.id not in done for s in j.scenarios)]
    counted = {"steps": 0, "seconds": 0.0}
    if progress:
        progress(len(done), total)

    def on_result(result) -> None:
        store.append(result)
        counted["steps"] += result.env_steps
        counted["seconds"] += result.seconds
        if progress:
            progress(len(store.done), total)

    executor.run(todo, cfg, spec, files, on_result)
    return store, spec, counted["steps"], counted["seconds"]


def run_campaign(
    artifact_dir: str | Path,
    cfg: CampaignConfig,
    out_dir: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    threads: int = 1,
    fresh: bool = False,
    compare_to: str | Path | None = None,
    promote_verdict: bool = True,
    signing_key: str | Path | None = None,
    trusted_keys: Sequence[str | Path] = (),
    allow_unsigned: bool = False,
    progress: Progress | None = None,
) -> CampaignOutcome:
    """Run (or resume) `cfg` on the artifact in `artifact_dir`, writing results.jsonl, traces/, summary.json and
    report.html to `out_dir`; `compare_to` runs the same campaign on a second artifact (results in
    out_dir/compare/<sha>) and adds per-scenario deltas. A passing verdict is signed with `signing_key` (promotion:
    edge.signing) when one is given. A promoted (signed) artifact, and with `trusted_keys` any artifact, is verified
    against `trusted_keys` (default: the public half of `signing_key`) before anything runs; `allow_unsigned` turns
    that refusal into a warning (development only)."""
    artifact_dir, out_dir = Path(artifact_dir), Path(out_dir)
    started, t0 = _now(), time.perf_counter()
    if not trusted_keys and signing_key is not None:
        trusted_keys = [public_path(signing_key)]
    signatures = {}
    for directory in (artifact_dir, *([] if compare_to is None else [Path(compare_to)])):
        check = verify_if_promoted(directory, trusted_keys, allow_unsigned)
        if check and not check.passed:
            warnings.warn(check.message, stacklevel=2)
        signatures[str(directory)] = check.message if check else "unsigned (not promoted)"
    files = ArtifactFiles.read(artifact_dir)  # refuses a tampered artifact before anything runs
    other_files = None if compare_to is None else ArtifactFiles.read(compare_to)
    with Executor(workers, ray_address, threads) as executor:
        store, spec, steps, seconds = _simulate(artifact_dir, files, cfg, out_dir, executor, fresh, progress)
        other_store = None
        if other_files is not None:
            other_dir = out_dir / "compare" / other_files.sha256[:12]
            other_store = _simulate(Path(compare_to), other_files, cfg, other_dir, executor, fresh, progress)[0]
    rows = store.rows()
    checks = evaluate(rows, cfg)
    meta = {
        "artifact": str(artifact_dir),
        "policy_sha256": files.sha256,
        "robot": spec.name,
        "backend": cfg.backend,
        "campaign_sha256": cfg.sim_sha256(),
        "out_dir": str(out_dir),
        "started_at": started,
        "finished_at": _now(),
        "wall_s": round(time.perf_counter() - t0, 3),
        "env_steps_this_run": steps,
        "signatures": signatures,
    }
    summary = summarize(rows, cfg, checks, meta)
    comparison = None
    if other_store is not None:
        other_meta = {"artifact": str(compare_to), "policy_sha256": other_files.sha256}
        comparison = compare(rows, other_store.rows(), cfg, other_meta)
        atomic_write_bytes(out_dir / COMPARE_FILE, json.dumps(comparison, indent=1).encode())
        summary["comparison"] = {k: v for k, v in comparison.items() if k != "per_scenario"}
    traces = {w["id"]: store.trace(next(r for r in rows if r["id"] == w["id"])) for w in summary["worst_cases"]}
    report = render(summary, rows, cfg, traces, comparison)
    summary_bytes = json.dumps(summary, indent=1).encode()
    atomic_write_bytes(out_dir / REPORT_FILE, report)
    atomic_write_bytes(out_dir / SUMMARY_FILE, summary_bytes)
    verdict = None
    if promote_verdict:
        verdict = make_verdict(summary, cfg.sim_sha256(), sha256_bytes(report), sha256_bytes(summary_bytes))
        # a failing verdict replaces a passing one too: the artifact is not promoted until it passes again
        record_verdict(artifact_dir, verdict)
        if verdict["passed"] and signing_key is not None:
            verdict = {**verdict, "signed_by": sign_artifact(artifact_dir, signing_key)}
    return CampaignOutcome(summary, out_dir, verdict, comparison, steps, seconds)


def with_backend(cfg: CampaignConfig, backend: str | None) -> CampaignConfig:
    """The campaign with its backend overridden from the command line (None keeps the YAML's)."""
    return cfg if backend is None else dataclasses.replace(cfg, backend=backend)
