"""`retrain(logs, artifact, out_dir)`: field logs -> drift decision -> system identification -> fine-tuning ->
campaigns -> promotion, with a lineage record. The one entry point of `sim2real retrain` and `sim2real loop`.

Every stage writes its result to out_dir/<stage>.json (atomically) and is skipped when that file exists, so a
run interrupted anywhere resumes where it stopped: the fine-tuning from its last checkpoint, the campaigns from
their results files.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.fileio import atomic_write_bytes, sha256_file
from sim2real.errors import UserError
from training.retrain.config import DEFAULT_CONFIG, RetrainConfig
from training.retrain.registry import DEFAULT_REGISTRY, Registry

Progress = Callable[[str, float], None]  # (stage, fraction done)
STAGES = ("ingest", "decide", "sysid", "finetune", "campaigns", "promote")


@dataclass
class RetrainResult:
    triggered: bool
    reason: str  # the trigger decision in words (one line)
    field_kpis: dict
    baseline_kpis: dict
    episodes: int
    logs: list[dict]  # path, sha256, rows, damage
    drifted_kpis: list[str] = field(default_factory=list)
    identified: dict = field(default_factory=dict)  # parameter -> value
    sysid_error_before: float | None = None
    sysid_error_after: float | None = None
    sysid_plot: str | None = None  # PNG: logged velocities beside the untuned and the identified twin's
    training_run: str | None = None
    new_artifact: Path | None = None
    campaigns: dict = field(default_factory=dict)  # campaign name -> CampaignCheck.to_dict() + report paths
    promoted: bool = False
    promotion_reason: str = ""
    lineage_id: int | None = None  # the retraining's id in the registry
    lineage: list[dict] = field(default_factory=list)  # [{kind, ref, detail}] logs -> ... -> campaign report
    timings: dict = field(default_factory=dict)  # stage -> seconds
    out_dir: Path | None = None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("new_artifact", "out_dir"):
            d[k] = None if d[k] is None else str(d[k])
        return d


class Stages:
    """Stage results in out_dir/<stage>.json: run a stage only when its result is not there yet."""

    def __init__(self, out_dir: Path, progress: Progress | None):
        self.out_dir, self.progress = out_dir, progress
        self.timings: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], dict]) -> dict:
        path = self.out_dir / f"{name}.json"
        if path.is_file():
            data = json.loads(path.read_text())
        else:
            self._event(name, "start")
            if self.progress:
                self.progress(name, 0.0)
            t0 = time.perf_counter()
            data = fn()
            data["seconds"] = round(time.perf_counter() - t0, 3)
            atomic_write_bytes(path, json.dumps(data, indent=1, default=str).encode())
            self._event(name, "done")
        if self.progress:
            self.progress(name, 1.0)
        self.timings[name] = data.get("seconds", 0.0)
        return data

    def _event(self, stage: str, what: str) -> None:
        # an append-only trace of stage starts and ends (tests count them; people read it after a crash)
        with open(self.out_dir / "stages.log", "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {stage} {what}\n")


def retrain(
    logs: Path | list[Path],
    artifact: Path,
    out_dir: Path,
    budget: str = "quick",
    registry: Path | None = None,
    progress: Progress | None = None,
    *,
    force: bool = False,
    config: Path = DEFAULT_CONFIG,
    trigger: Path | None = None,
    retrain_id: int | None = None,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
    seed: int = 0,
) -> RetrainResult:
    """Decide from the field logs (a file, a directory of them, or a list of files) whether the deployed artifact
    needs retraining; if so (or with force) identify the twin, fine-tune, validate and promote.

    `registry`: the lineage registry (default runs/registry.sqlite). `retrain_id`: continue this registry entry
    (watch mode claims the logs first); otherwise the entry of out_dir is reused, or a new one made.
    `log`: receives one human-readable line per finished stage. `show_progress`: the PPO progress bar.
    """
    from edge.manifest import load_manifest
    from sim.robot import load_robot
    from training.retrain.ingest import mcap_files

    artifact, out_dir = Path(artifact), Path(out_dir)
    cfg = RetrainConfig.from_yaml(config)
    plan = cfg.budget(budget)
    files = sorted({f for p in ([logs] if isinstance(logs, str | Path) else logs) for f in mcap_files(p)})
    if not files:
        raise UserError(f"no finalised MCAP field logs in {logs}")
    manifest = load_manifest(artifact)
    if not manifest.campaign_verdict or not manifest.campaign_verdict.get("kpi_means"):
        raise UserError(
            f"{artifact} has no campaign verdict with KPI means: validate it first "
            f"(sim2real validate {artifact} --campaign quick); its KPIs are the field logs' baseline"
        )
    spec = load_robot(manifest.robot["name"])
    out_dir.mkdir(parents=True, exist_ok=True)
    say = log or (lambda line: None)
    stages = Stages(out_dir, progress)

    with Registry(registry or DEFAULT_REGISTRY) as reg:
        parent_sha = manifest.policy["sha256"]
        reg.add_artifact(parent_sha, artifact, spec.name, manifest.training_run_id, None)
        if reg.deployed(spec.name) is None:  # the artifact the logs came from is the one in service
            reg.mark_deployed(parent_sha, spec.name)
        if retrain_id is None:
            retrain_id = reg.begin(out_dir, parent_sha)

        ingest = stages.run("ingest", lambda: ingest_logs(files, spec))
        decision = stages.run("decide", lambda: _decide(ingest, manifest, trigger))
        result = RetrainResult(
            decision["retrain"],
            decision["reason"],
            ingest["field_kpis"],
            decision["baseline"],
            ingest["episodes"],
            ingest["logs"],
            decision["drifted"],
            lineage_id=retrain_id,
            out_dir=out_dir,
        )
        for d in (line for entry in ingest["logs"] for line in entry["damage"]):
            say(f"damaged log: {d}")
        say(("drift: " if decision["retrain"] else "no drift: ") + decision["reason"])
        reg.journal(retrain_id, [(e["sha256"], Path(e["path"]), e["size"]) for e in ingest["logs"]])
        reg.record(
            retrain_id,
            logs=[{k: e[k] for k in ("path", "sha256")} for e in ingest["logs"]],
            triggered=int(decision["retrain"]),
            reason=decision["reason"],
        )
        if not decision["retrain"] and not force:
            result.promotion_reason = "not retrained: no drift"
            return _finish(reg, result, stages)

        sysid = stages.run("sysid", lambda: _sysid(files, spec, cfg, plan, seed, progress, out_dir))
        result.identified = sysid["values"]
        result.sysid_error_before, result.sysid_error_after = sysid["error_before"], sysid["error_after"]
        result.sysid_plot = sysid["plot"]
        say(
            "identified "
            + ", ".join(f"{k} = {v:.4g}" for k, v in sysid["values"].items())
            + f"; trajectory error {sysid['error_before']:.4g} -> {sysid['error_after']:.4g} "
            f"({sysid['steps']} logged steps replayed)"
        )
        reg.record(
            retrain_id,
            identified=sysid["values"],
            sysid={k: sysid[k] for k in ("error_before", "error_after", "steps", "params")},
        )

        registered = (reg.artifact(parent_sha) or {}).get("training_run_dir")
        tuned = stages.run(
            "finetune",
            lambda: _finetune(
                artifact, manifest, registered, sysid["values"], cfg, plan, out_dir, seed, progress, show_progress
            ),
        )
        new_artifact = Path(tuned["artifact"])
        result.training_run, result.new_artifact = tuned["run_dir"], new_artifact
        say(f"fine-tuned {tuned['iterations']} iterations from {tuned['init_from']} -> {new_artifact}")
        reg.record(retrain_id, training_run=tuned["run_dir"], new_sha256=tuned["sha256"])
        reg.add_artifact(
            tuned["sha256"], new_artifact, spec.name, tuned["run_id"], Path(tuned["run_dir"]), parent_sha, retrain_id
        )

        campaigns = stages.run(
            "campaigns", lambda: _campaigns(new_artifact, artifact, sysid["values"], plan, out_dir, progress)
        )
        for c in campaigns["checks"]:
            reg.add_campaign(
                tuned["sha256"],
                retrain_id,
                c["kind"],
                c["name"],
                c["passed"],
                Path(c["summary"]),
                Path(c["report"]),
                c["summary_sha256"],
            )
            means = ", ".join(
                f"{k} {c['kpi_means'][k]:.3g} (deployed {c['deployed_kpi_means'][k]:.3g})"
                for k in cfg.promotion.kpis
                if k in c["kpi_means"] and k in c["deployed_kpi_means"]
            )
            say(f"campaign {c['name']}: {'PASS' if c['passed'] else 'FAIL'}; {means}")
        result.campaigns = {c["name"]: c for c in campaigns["checks"]}

        promotion = stages.run("promote", lambda: _promote(new_artifact, campaigns, cfg))
        result.promoted, result.promotion_reason = promotion["promoted"], promotion["reason"]
        if result.promoted:
            reg.mark_deployed(tuned["sha256"], spec.name)
        say(("promoted: " if result.promoted else "not promoted: ") + promotion["reason"])
        reg.record(retrain_id, promoted=int(result.promoted), promotion_reason=result.promotion_reason)
        return _finish(reg, result, stages)


def _finish(reg: Registry, result: RetrainResult, stages: Stages) -> RetrainResult:
    result.timings = dict(stages.timings)
    reg.finish(result.lineage_id)
    result.lineage = lineage_steps(reg, result)
    atomic_write_bytes(stages.out_dir / "result.json", json.dumps(result.to_dict(), indent=1).encode())
    return result


# ------------------------------------------------------------------------------------------------ stages
def ingest_logs(files: list[Path], spec) -> dict:
    """The field logs read: per file its hash, rows, episodes and damaged spans; the KPI means over all episodes
    (the campaign's KPI code) and the episode count."""
    from sim.campaign.rollout import robot_limits
    from training.retrain.drift import field_kpis
    from training.retrain.ingest import read_field_log

    logs = [read_field_log(f, list(spec.joints)) for f in files]
    kpis, episodes = field_kpis(logs, robot_limits(spec))
    entries = [
        {
            "path": str(f),
            "sha256": sha256_file(f),
            "size": f.stat().st_size,
            "rows": len(log.t),
            "episodes": len(log.episodes()),
            "damage": log.damage,
        }
        for f, log in zip(files, logs, strict=True)
    ]
    return {"logs": entries, "field_kpis": kpis, "episodes": episodes}


def _decide(ingest: dict, manifest, trigger: Path | None) -> dict:
    from training.retrain.drift import DEFAULT_TRIGGER, TriggerPolicy, decide

    policy = TriggerPolicy.from_yaml(trigger or DEFAULT_TRIGGER)
    baseline = manifest.campaign_verdict["kpi_means"]
    d = decide(ingest["field_kpis"], ingest["episodes"], baseline, policy)
    return {
        "retrain": d.retrain,
        "reason": d.summary(),
        "reasons": d.reasons,
        "drifted": d.drifted,
        "baseline": baseline,
        "campaign": manifest.campaign_verdict.get("campaign"),
    }


def _sysid(
    files: list[Path], spec, cfg: RetrainConfig, plan, seed: int, progress: Progress | None, out_dir: Path
) -> dict:
    from training.retrain.ingest import read_field_log
    from training.retrain.sysid import identify, log_windows

    windows = log_windows([read_field_log(f, list(spec.joints)) for f in files], plan.window_s, plan.windows)
    sysid_cfg = cfg.sysid_config(spec.name, plan, seed)
    report = (lambda g, total, best: progress("sysid", g / total)) if progress else None
    r = identify(spec, windows, sysid_cfg, progress=report)
    plot = out_dir / "sysid_fit.png"
    plot_fit(spec, windows[0], r.values, plot)
    return {**r.to_dict(), "params": list(sysid_cfg.params), "windows": len(windows), "plot": str(plot)}


def plot_fit(spec, window, identified: dict, path: Path) -> None:
    """The logged base velocities of one replay window beside the untuned and the identified twin's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from training.retrain.sysid import replay

    replayed = replay(spec, [window], [{}, identified])[:, :, 0]  # (T, candidate, 3)
    logged = [window.lin_vel[:, 0], window.lin_vel[:, 1], window.ang_vel[:, 2]]
    t = np.arange(len(window.targets)) * spec.control_dt
    fig, axes = plt.subplots(1, 2, figsize=(9, 2.8))
    for ax, i, label in ((axes[0], 0, "vx (m/s)"), (axes[1], 2, "wz (rad/s)")):
        ax.plot(t, logged[i], "k", lw=3, alpha=0.5, label="field log")
        ax.plot(t, replayed[:, 0, i], "--", label="twin as trained")
        ax.plot(t, replayed[:, 1, i], lw=1, label="identified twin")
        ax.set_xlabel("s")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _finetune(
    artifact: Path,
    manifest,
    registered: str | None,
    identified: dict,
    cfg: RetrainConfig,
    plan,
    out_dir: Path,
    seed: int,
    progress: Progress | None,
    show_progress: bool,
) -> dict:
    from training.ppo.launch import train
    from training.retrain.finetune import ProgressWatcher, find_run, finetune_config, training_run_dir

    source = training_run_dir(artifact, manifest, registered)
    ranges = cfg.centred_ranges(identified)
    root = out_dir / "train"
    ppo = finetune_config(source, ranges, root, plan.finetune, seed)
    started = find_run(root, manifest.robot["name"])  # an interrupted fine-tuning: continue it
    resume = started if started is not None and (started / "checkpoints").is_dir() else None
    report = (lambda it, total: progress("finetune", it / total)) if progress else (lambda it, total: None)
    with ProgressWatcher(root, manifest.robot["name"], ppo.iterations, report):
        run_dir = train(ppo, resume=resume, show_progress=show_progress)
    policy = run_dir / "policy"
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "run_dir": str(run_dir),
        "run_id": json.loads((run_dir / "run_info.json").read_text())["run_id"],
        "init_from": ppo.init_from,
        "randomization_ranges": ranges,
        "iterations": summary["iteration"],
        "final_eval": summary["final_eval"],
        "artifact": str(policy),
        "sha256": sha256_file(policy / "policy.onnx"),
    }


def identified_twin_campaign(standard, identified: dict):
    """The standard campaign's commands and gates on one twin: the identified parameters, nominal otherwise."""
    from sim.campaign.config import COMMAND_AXIS

    axes = {k: [float(v)] for k, v in identified.items()}
    axes[COMMAND_AXIS] = standard.axes[COMMAND_AXIS]
    gates = dataclasses.replace(standard.gates, per_axis={})
    return dataclasses.replace(standard, name=f"{standard.name}-identified-twin", axes=axes, gates=gates)


def _campaigns(new: Path, deployed: Path, identified: dict, plan, out_dir: Path, progress: Progress | None) -> dict:
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import REPORT_FILE, SUMMARY_FILE, run_campaign
    from training.retrain.promote import campaign_check

    standard = load_campaign(plan.campaign)
    runs = [
        ("standard", standard, out_dir / f"campaign-{standard.name}"),
        ("identified-twin", identified_twin_campaign(standard, identified), out_dir / "campaign-identified-twin"),
    ]
    checks = []
    for i, (kind, cfg, where) in enumerate(runs):

        def report(done, total, i=i):
            if progress:
                progress("campaigns", (i + done / max(total, 1)) / len(runs))

        outcome = run_campaign(new, cfg, where, compare_to=deployed, promote_verdict=False, progress=report)
        check = campaign_check(kind, outcome.summary).to_dict()
        checks.append(
            {
                **check,
                "summary": str(where / SUMMARY_FILE),
                "report": str(where / REPORT_FILE),
                "summary_sha256": sha256_file(where / SUMMARY_FILE),
                "campaign_file": plan.campaign,
            }
        )
    return {"checks": checks}


def _promote(new: Path, campaigns: dict, cfg: RetrainConfig) -> dict:
    from sim.campaign.config import load_campaign
    from training.retrain.promote import CampaignCheck, decide, write_verdict

    checks = [CampaignCheck.from_dict(c) for c in campaigns["checks"]]
    promoted, reason = decide(checks, cfg.promotion)
    verdict = None
    if promoted:
        standard = next(c for c in campaigns["checks"] if c["kind"] == "standard")
        summary = json.loads(Path(standard["summary"]).read_text())
        verdict = write_verdict(
            new, summary, load_campaign(standard["campaign_file"]), Path(standard["summary"]).parent
        )
    return {"promoted": promoted, "reason": reason, "verdict": verdict}


# ------------------------------------------------------------------------------------------------ lineage
def lineage_steps(reg: Registry, result: RetrainResult) -> list[dict]:
    """The chain as {kind, ref, detail} rows: logs -> identified parameters -> training run -> artifact ->
    campaign reports (what `sim2real lineage` prints for the new artifact)."""
    steps = [
        {"kind": "logs", "ref": e["path"], "detail": f"sha256 {e['sha256'][:12]}, {e['episodes']} episodes"}
        for e in result.logs
    ]
    steps.append(
        {"kind": "decision", "ref": "retrain" if result.triggered else "no retraining", "detail": result.reason}
    )
    if result.identified:
        steps.append(
            {
                "kind": "identified",
                "ref": ", ".join(f"{k}={v:.4g}" for k, v in result.identified.items()),
                "detail": f"trajectory error {result.sysid_error_before:.4g} -> {result.sysid_error_after:.4g}",
            }
        )
    if result.training_run:
        steps.append(
            {
                "kind": "training run",
                "ref": result.training_run,
                "detail": "fine-tuned from the deployed artifact's checkpoint",
            }
        )
    if result.new_artifact:
        row = reg.artifact(sha256_file(Path(result.new_artifact) / "policy.onnx")) or {}
        steps.append(
            {
                "kind": "artifact",
                "ref": str(result.new_artifact),
                "detail": f"sha256 {row.get('sha256', '')[:12]}" + (", deployed" if row.get("deployed") else ""),
            }
        )
    for c in result.campaigns.values():
        steps.append(
            {"kind": "campaign", "ref": c["report"], "detail": f"{c['name']}: " + ("pass" if c["passed"] else "FAIL")}
        )
    return steps
