"""A whole campaign: verify the artifact, run the scenarios not yet in the results (resume), gate, write the
JSON summary and HTML report, optionally compare with a second artifact, and record the verdict in the
artifact's manifest."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from edge.config import setting
from edge.fileio import atomic_write_bytes, sha256_bytes
from edge.manifest import load_manifest, record_verdict
from edge.signing import TrustPolicy, sign_artifact
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
    out_dir: Path,
    *,
    cfg: CampaignConfig,
    executor: Executor,
    fresh: bool,
    progress: Progress | None,
) -> tuple[ResultStore, RobotSpec, int, float]:
    manifest = load_manifest(artifact_dir)
    # judged on the MJCF's own physics, whatever cheaper physics the robot YAML trains on
    spec = load_robot(cfg.robot or manifest.robot["name"]).with_mjcf_physics()
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


@dataclass(frozen=True)
class CampaignRequest:
    """One campaign run: which artifact, which campaign, where the results go, how it runs and what it promotes."""

    artifact: str | Path = setting(help="the artifact directory the campaign runs")
    campaign: CampaignConfig = setting(help="the campaign (sim.campaign.config.load_campaign)")
    out: str | Path = setting(help="results.jsonl, traces/, summary.json and report.html go here; resumed from here")
    workers: int = setting(1, "parallel workers; more than one runs the batches as Ray tasks", ge=1)
    ray_address: str | None = setting(
        None, "address of a running Ray cluster to run the batches on (e.g. auto, ray://host:10001)"
    )
    threads: int = setting(1, "MuJoCo threads per worker (a Ray task reserves that many CPUs)", ge=1)
    fresh: bool = setting(False, "discard the results already in `out` instead of resuming them")
    compare_to: str | Path | None = setting(
        None, "a second artifact run on the same campaign (results in out/compare/<sha>), with per-scenario deltas"
    )
    promote_verdict: bool = setting(True, "record the verdict in the artifact's manifest")
    signing_key: str | Path | None = setting(
        None, "sign a passing verdict with this ed25519 key (sim2real keys init): promotion"
    )
    trust: TrustPolicy = setting(
        TrustPolicy(),
        "a promoted (signed) artifact, and with trusted keys any artifact, must verify against the trusted keys "
        "(default: the public half of signing_key) before anything runs; allow_unsigned makes a refusal a warning",
    )


def run_campaign(request: CampaignRequest, progress: Progress | None = None) -> CampaignOutcome:
    """Run (or resume) the campaign on the artifact: verify, simulate, write the summary and report, record the
    verdict."""
    started, t0 = _now(), time.perf_counter()
    signatures = _verify(request)
    files = ArtifactFiles.read(request.artifact)  # refuses a tampered artifact before anything runs
    other_files = None if request.compare_to is None else ArtifactFiles.read(request.compare_to)
    out_dir = Path(request.out)
    with Executor(request.workers, request.ray_address, request.threads) as executor:
        simulate = functools.partial(_simulate, cfg=request.campaign, executor=executor, fresh=request.fresh)
        store, spec, steps, seconds = simulate(Path(request.artifact), files, out_dir, progress=progress)
        other_store = None
        if other_files is not None and request.compare_to is not None:  # both or neither
            other_dir = out_dir / "compare" / other_files.sha256[:12]
            other_store = simulate(Path(request.compare_to), other_files, other_dir, progress=progress)[0]
    meta = {
        "artifact": str(Path(request.artifact)),
        "policy_sha256": files.sha256,
        "robot": spec.name,
        "backend": request.campaign.backend,
        "campaign_sha256": request.campaign.sim_sha256(),
        "out_dir": str(out_dir),
        "started_at": started,
        "finished_at": _now(),
        "wall_s": round(time.perf_counter() - t0, 3),
        "env_steps_this_run": steps,
        "signatures": signatures,
    }
    summary, comparison = _report(request, store, other_store, other_files, meta)
    verdict = _promote(request, summary) if request.promote_verdict else None
    return CampaignOutcome(summary, out_dir, verdict, comparison, steps, seconds)


def _verify(request: CampaignRequest) -> dict[str, str]:
    """Each artifact's signature check in words; a refusal raises before anything runs, a waived one warns."""
    trust = request.trust.or_signer(request.signing_key)
    signatures = {}
    for directory in (Path(request.artifact), *([] if request.compare_to is None else [Path(request.compare_to)])):
        check = trust.check_if_promoted(directory)
        if check and not check.passed:
            warnings.warn(check.message, stacklevel=3)
        signatures[str(directory)] = check.message if check else "unsigned (not promoted)"
    return signatures


def _report(
    request: CampaignRequest,
    store: ResultStore,
    other_store: ResultStore | None,
    other_files: ArtifactFiles | None,
    meta: dict,
) -> tuple[dict, dict | None]:
    """Gate the results, write the summary, the comparison and the HTML report; returns (summary, comparison)."""
    cfg, out_dir = request.campaign, Path(request.out)
    rows = store.rows()
    summary = summarize(rows, cfg, evaluate(rows, cfg), meta)
    comparison = None
    if other_store is not None and other_files is not None:  # both or neither
        other_meta = {"artifact": str(request.compare_to), "policy_sha256": other_files.sha256}
        comparison = compare(rows, other_store.rows(), cfg, other_meta)
        atomic_write_bytes(out_dir / COMPARE_FILE, json.dumps(comparison, indent=1).encode())
        summary["comparison"] = {k: v for k, v in comparison.items() if k != "per_scenario"}
    traces = {w["id"]: store.trace(next(r for r in rows if r["id"] == w["id"])) for w in summary["worst_cases"]}
    atomic_write_bytes(out_dir / REPORT_FILE, render(summary, rows, cfg, traces, comparison))
    atomic_write_bytes(out_dir / SUMMARY_FILE, json.dumps(summary, indent=1).encode())
    return summary, comparison


def _promote(request: CampaignRequest, summary: dict) -> dict:
    """The verdict written into the artifact's manifest, signed when it passed and a signing key is given."""
    out_dir = Path(request.out)
    report, summary_bytes = (out_dir / REPORT_FILE).read_bytes(), (out_dir / SUMMARY_FILE).read_bytes()
    verdict = make_verdict(summary, request.campaign.sim_sha256(), sha256_bytes(report), sha256_bytes(summary_bytes))
    # a failing verdict replaces a passing one too: the artifact is not promoted until it passes again
    record_verdict(request.artifact, verdict)
    if verdict["passed"] and request.signing_key is not None:
        verdict = {**verdict, "signed_by": sign_artifact(request.artifact, request.signing_key)}
    return verdict


def with_backend(cfg: CampaignConfig, backend: str | None) -> CampaignConfig:
    """The campaign with its backend overridden from the command line (None keeps the YAML's)."""
    return cfg if backend is None else dataclasses.replace(cfg, backend=backend)
