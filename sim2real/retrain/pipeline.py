"""`retrain(RetrainRequest(logs, artifact, out_dir))`: field logs -> drift decision -> system identification ->
fine-tuning -> the choice of its checkpoint -> campaigns -> promotion, with a lineage record. The one entry point of
`sim2real retrain` and `sim2real loop`.

Seven stages on the one Stage runner (sim2real.pipeline): each finished stage's result is in out_dir/retrain.json
(rewritten atomically) and the stage is skipped on the next call, so a run interrupted anywhere resumes where it
stopped: the fine-tuning from its last checkpoint, the choice afresh, the campaigns from their results files.
Without drift (and without `force`) the run ends after `decide`. The registry rows and log lines of a stage are
written each time a run passes it, also when it was finished earlier.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge.config import setting
from edge.fileio import atomic_write_bytes, sha256_file
from edge.signing import TrustPolicy
from sim2real.errors import UserError
from sim2real.pipeline import Budget, Pipeline, Progress, Run, Stage, StageContext
from training.retrain.config import DEFAULT_CONFIG, RetrainConfig
from training.retrain.drift import DEFAULT_TRIGGER, ingest_logs
from training.retrain.registry import DEFAULT_REGISTRY, CampaignRecord, Registry

# seconds each stage takes: minimal as measured in the loop's minimal run (2 idle cores), quick and full scaled by
# their system-id evaluations, fine-tuning iterations and campaign episodes; the ETAs and the weights of the stages
# in the pipeline's progress
EXPECTED_S = {
    "minimal": {"ingest": 0.5, "decide": 0.1, "sysid": 5, "finetune": 20, "select": 5, "campaigns": 7, "promote": 0.1},
    "quick": {"ingest": 0.5, "decide": 0.1, "sysid": 5, "finetune": 40, "select": 10, "campaigns": 7, "promote": 0.1},
    "full": {"ingest": 1, "decide": 0.1, "sysid": 20, "finetune": 130, "select": 25, "campaigns": 700, "promote": 0.1},
}


@dataclass
class RetrainResult:
    triggered: bool
    reason: str  # the trigger decision in words (one line)
    field_kpis: dict  # the measured KPIs' means
    baseline_kpis: dict
    episodes: int
    logs: list[dict]  # path, sha256, rows, damage, read_as (signal -> topic)
    drifted_kpis: list[str] = field(default_factory=list)
    not_measured: dict = field(default_factory=dict)  # KPI -> why the logs cannot support it
    gyro_bias: dict = field(default_factory=dict)  # training.retrain.calibration.GyroBias.to_dict()
    identified: dict = field(default_factory=dict)  # parameter -> value
    estimates: dict = field(default_factory=dict)  # parameter -> {value, low, high (95%), determined, why}
    sysid_error_before: float | None = None
    sysid_error_after: float | None = None
    sysid_plot: str | None = None  # PNG: logged velocities beside the untuned and the identified twin's
    training_run: str | None = None
    selected_iteration: int | None = None  # the fine-tuning's checkpoint that became the candidate
    checkpoint_scores: list[dict] = field(default_factory=list)  # training.retrain.select.CheckpointScore per one
    new_artifact: Path | None = None
    campaigns: dict = field(default_factory=dict)  # campaign name -> CampaignCheck.to_dict() + report paths
    promoted: bool = False
    promotion_reason: str = ""
    signed_by: str | None = None  # id of the key that signed the promoted artifact
    lineage_id: int | None = None  # the retraining's id in the registry
    lineage: list[dict] = field(default_factory=list)  # [{kind, ref, detail}] logs -> ... -> campaign report
    timings: dict = field(default_factory=dict)  # stage -> seconds
    out_dir: Path | None = None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("new_artifact", "out_dir"):
            d[k] = None if d[k] is None else str(d[k])
        return d


@dataclass(frozen=True)
class RetrainRequest:
    """One retraining: the field logs, the artifact they came from, where it runs, and how."""

    logs: Path | tuple[Path, ...] = setting(help="the field logs: a file, a directory of them, or several files")
    artifact: Path = setting(help="the deployed artifact the logs came from (its campaign KPIs are the baseline)")
    out_dir: Path = setting(help="the retraining's directory (retrain.json, train/, campaign-*/); resumed from here")
    budget: str = setting("quick", "minimal, quick, full (config/retrain/retrain.yaml) or a budget YAML")
    registry: Path = setting(DEFAULT_REGISTRY, "the lineage registry (watch mode: also its journal of claimed logs)")
    force: bool = setting(False, "retrain even when the trigger stays silent")
    config: Path = setting(DEFAULT_CONFIG, "the retraining YAML")
    trigger: Path = setting(DEFAULT_TRIGGER, "the trigger policy YAML")
    retrain_id: int | None = setting(
        None, "continue this registry entry (watch mode claims the logs first); None reuses out_dir's or makes one"
    )
    show_progress: bool = setting(False, "show the PPO progress bar")
    seed: int = setting(0, "seed of system identification and fine-tuning", ge=0)
    signing_key: Path | None = setting(
        None, "sign the promoted artifact with this ed25519 key (sim2real keys init; edge.signing)"
    )
    trust: TrustPolicy = setting(
        TrustPolicy(),
        "the deployed artifact, when signed, must verify against the trusted keys (default: the public half of "
        "signing_key)",
    )
    topics: dict[str, str] = setting(
        {}, "signal -> the logs' topic (training.retrain.ingest ROLES), on top of the trigger policy's topics"
    )


@dataclass
class RetrainRun:
    """What the stages read: the request, its inputs resolved and checked once, and the open lineage registry."""

    request: RetrainRequest
    files: list[Path]  # the finalised field logs
    manifest: Any  # the deployed artifact's edge.manifest.Manifest
    spec: Any  # its robot (sim.robot.load_robot)
    cfg: RetrainConfig
    reg: Registry
    retrain_id: int
    say: Callable[[str], None]
    topics: dict[str, str]  # signal -> the logs' topic (trigger YAML, then the request's)

    @property
    def artifact(self) -> Path:
        return Path(self.request.artifact)

    @property
    def parent_sha(self) -> str:
        return self.manifest.policy["sha256"]


def retrain(
    request: RetrainRequest, progress: Progress | None = None, log: Callable[[str], None] | None = None
) -> RetrainResult:
    """Decide from the field logs whether the deployed artifact needs retraining; if so (or with force) identify the
    twin, fine-tune, validate and promote. `progress`: the retraining's fraction done and a note. `log` receives
    one human-readable line per finished stage."""
    from edge.manifest import load_manifest
    from sim.robot import load_robot
    from training.retrain.drift import TriggerPolicy
    from training.retrain.ingest import log_files

    logs, artifact, out_dir = request.logs, Path(request.artifact), Path(request.out_dir)
    cfg = RetrainConfig.from_yaml(request.config)
    plan = cfg.budget(request.budget)
    topics = {**TriggerPolicy.from_yaml(request.trigger).topics, **request.topics}
    files = sorted({f for p in ([logs] if isinstance(logs, str | Path) else logs) for f in log_files(p)})
    if not files:
        raise UserError(f"no finalised field logs (.mcap, .db3, .bag) in {logs}")
    manifest = load_manifest(artifact)
    if not manifest.campaign_verdict or not manifest.campaign_verdict.get("kpi_means"):
        raise UserError(
            f"{artifact} has no campaign verdict with KPI means: validate it first "
            f"(sim2real validate {artifact} --campaign quick); its KPIs are the field logs' baseline"
        )
    spec = load_robot(manifest.robot["name"])
    out_dir.mkdir(parents=True, exist_ok=True)

    with Registry(request.registry) as reg:
        retrain_id = _register(reg, request, manifest, spec.name)
        inputs = RetrainRun(request, files, manifest, spec, cfg, reg, retrain_id, log or _quiet, topics)
        record = {
            "logs": [str(f) for f in files],
            "artifact": str(artifact),
            "budget": plan.name,
            "force": request.force,
            "topics": topics,
        }
        # the retraining budget's sizes, by the stage that reads them
        sizes = Budget(
            plan.name,
            {
                "sysid": plan,
                "finetune": plan.finetune_for(bool(spec.feet)),
                "select": plan.campaign,
                "campaigns": plan.campaign,
            },
            EXPECTED_S.get(plan.name, {}),
        )
        run = PIPELINE.open(out_dir, record).execute(inputs, sizes, progress)
        return _finish(reg, _result(run, retrain_id), run)


def _register(reg: Registry, request: RetrainRequest, manifest, robot: str) -> int:
    """The retraining's registry entry: the deployed artifact registered (and marked in service when no other is),
    the request's entry, out_dir's, or a new one."""
    parent_sha = manifest.policy["sha256"]
    reg.add_artifact(parent_sha, Path(request.artifact), robot, manifest.training_run_id, None)
    if reg.deployed(robot) is None:  # the artifact the logs came from is the one in service
        reg.mark_deployed(parent_sha, robot)
    if request.retrain_id is not None:
        return request.retrain_id
    return reg.begin(Path(request.out_dir), parent_sha)


def _quiet(line: str) -> None:
    """No log."""


def _result(run: Run, retrain_id: int) -> RetrainResult:
    """The RetrainResult of the stages this run went through."""
    r = {name: run.results[name] for name in run.passed}
    ingest, decision = r["ingest"], r["decide"]
    result = RetrainResult(
        decision["retrain"],
        decision["reason"],
        ingest["field_kpis"],
        decision["baseline"],
        ingest["episodes"],
        ingest["logs"],
        decision["drifted"],
        ingest.get("not_measured", {}),
        ingest.get("gyro_bias", {}),
        lineage_id=retrain_id,
        timings={name: run.seconds[name] for name in run.passed},
        out_dir=run.out,
    )
    if run.stopped == "decide":
        result.promotion_reason = "not retrained: no drift"
        return result
    sysid, tuned, chosen = r["sysid"], r["finetune"], r["select"]
    campaigns, promotion = r["campaigns"], r["promote"]
    result.identified, result.estimates = sysid["values"], sysid.get("estimates", {})
    result.sysid_error_before, result.sysid_error_after = sysid["error_before"], sysid["error_after"]
    result.sysid_plot = sysid["plot"]
    result.training_run, result.new_artifact = tuned["run_dir"], Path(chosen["artifact"])
    result.selected_iteration, result.checkpoint_scores = chosen["iteration"], chosen["scores"]
    result.campaigns = {c["name"]: c for c in campaigns["checks"]}
    result.promoted, result.promotion_reason = promotion["promoted"], promotion["reason"]
    result.signed_by = promotion.get("signed_by")
    return result


def _finish(reg: Registry, result: RetrainResult, run: Run) -> RetrainResult:
    reg.finish(result.lineage_id)
    result.lineage = lineage_steps(reg, result)
    atomic_write_bytes(run.out / "result.json", json.dumps(result.to_dict(), indent=1).encode())
    return result


# ------------------------------------------------------------------------------------------------ stages
def _ingest(ctx: StageContext) -> dict:
    """The logs' KPIs and the IMU's gyro bias; where the logs determine it, policy_node's calibration file."""
    from training.retrain.calibration import GyroBias

    ingest = ingest_logs(ctx.config.files, ctx.config.spec, ctx.config.topics)
    bias = GyroBias.from_dict(ingest["gyro_bias"])
    if bias.offset.any():
        path = ctx.out / "calibration.yaml"
        atomic_write_bytes(path, bias.ros_params().encode())
        ingest["calibration"] = str(path)
    return ingest


def _ingested(ctx: StageContext, ingest: dict) -> None:
    from training.retrain.calibration import GyroBias

    for d in (line for entry in ingest["logs"] for line in entry["damage"]):
        ctx.config.say(f"damaged log: {d}")
    calibration = f"; policy_node's calibration: {ingest['calibration']}" if "calibration" in ingest else ""
    ctx.config.say(f"gyro bias against the odometry: {GyroBias.from_dict(ingest.get('gyro_bias')).show()}{calibration}")


def _decide(ctx: StageContext) -> dict:
    from training.retrain.drift import FieldKpis, TriggerPolicy, decide

    run = ctx.config
    policy = TriggerPolicy.from_yaml(run.request.trigger)
    baseline = run.manifest.campaign_verdict["kpi_means"]
    d = decide(FieldKpis.from_ingest(ctx.results["ingest"]), baseline, policy)
    return {
        "retrain": d.retrain,
        "reason": d.summary(),
        "reasons": d.reasons,
        "drifted": d.drifted,
        "baseline": baseline,
        "campaign": run.manifest.campaign_verdict.get("campaign"),
    }


def _decided(ctx: StageContext, decision: dict) -> None:
    run, ingest = ctx.config, ctx.results["ingest"]
    run.say(("drift: " if decision["retrain"] else "no drift: ") + decision["reason"])
    run.reg.journal(run.retrain_id, [(e["sha256"], Path(e["path"]), e["size"]) for e in ingest["logs"]])
    run.reg.record(
        run.retrain_id,
        logs=[{k: e[k] for k in ("path", "sha256")} for e in ingest["logs"]],
        triggered=int(decision["retrain"]),
        reason=decision["reason"],
    )


def _no_drift(ctx: StageContext, decision: dict) -> bool:
    return not decision["retrain"] and not ctx.config.request.force


def _sysid(ctx: StageContext) -> dict:
    """ctx.settings: the retraining budget (training.retrain.config.Budget): replay windows and search sizes."""
    from training.retrain.calibration import GyroBias
    from training.retrain.ingest import read_field_log
    from training.retrain.sysid import identify, log_windows

    run, plan = ctx.config, ctx.settings
    bias = GyroBias.from_dict(ctx.results["ingest"].get("gyro_bias"))  # the twin's gyro has none
    windows = log_windows(
        [bias.remove(read_field_log(f, list(run.spec.joints), topics=run.topics)) for f in run.files],
        plan.sysid.window_s,
        plan.sysid.windows,
    )
    if not windows:
        raise UserError(
            "no stretch of the logs to replay: system identification needs odom, joint_states and joint_commands "
            "logged together"
        )
    sysid_cfg = run.cfg.sysid_config(run.spec.name, plan, run.request.seed)
    r = identify(
        run.spec,
        windows,
        sysid_cfg,
        progress=lambda done, error: ctx.progress(done, f"trajectory error {error:.3g}"),
    )
    plot = ctx.out / "sysid_fit.png"
    plot_fit(run.spec, windows[0], r.values, plot)
    return {**r.to_dict(), "params": list(sysid_cfg.params), "windows": len(windows), "plot": str(plot)}


def _identified(ctx: StageContext, sysid: dict) -> None:
    run = ctx.config
    estimates = sysid.get("estimates", {})
    fits = [
        f"{k} = {e['value']:.4g} [{e['low']:.4g}, {e['high']:.4g}]" for k, e in estimates.items() if e["determined"]
    ]
    loose = [f"{k} ({e['why']})" for k, e in estimates.items() if not e["determined"]]
    run.say(
        "identified "
        + (", ".join(fits) or "nothing")
        + (f"; not determined: {', '.join(loose)}" if loose else "")
        + f"; trajectory error {sysid['error_before']:.4g} -> {sysid['error_after']:.4g} "
        f"({sysid['steps']} logged steps replayed)"
    )
    run.reg.record(
        run.retrain_id,
        identified=sysid["values"],
        sysid={k: sysid[k] for k in ("error_before", "error_after", "steps", "params", "estimates") if k in sysid},
    )


def determined(sysid: dict) -> dict[str, float]:
    """The identified values that the logs determine: what the fine-tuning centres its randomisation on and the
    identified twin takes. The others keep the training's ranges and the nominal twin's values. (A sysid result
    recorded before intervals existed holds values only: all of them.)"""
    if "estimates" not in sysid:
        return dict(sysid["values"])
    return {k: e["value"] for k, e in sysid["estimates"].items() if e["determined"]}


def finetune_ranges(cfg: RetrainConfig, sysid: dict) -> dict[str, list[float]]:
    """RetrainConfig.finetune_ranges for a sysid record: its determined values, and the others' intervals."""
    estimates = sysid.get("estimates", {})
    undetermined = {k: (e["low"], e["high"]) for k, e in estimates.items() if not e["determined"]}
    return cfg.finetune_ranges(determined(sysid), undetermined)


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


def _finetune(ctx: StageContext) -> dict:
    """ctx.settings: PPOConfig overrides of the retraining budget; the reward terms behind the drifted KPIs weigh
    more (RetrainConfig.emphasis) unless those overrides set reward_scales themselves."""
    from training.ppo.launch import train
    from training.retrain.finetune import ProgressWatcher, find_run, finetune_config, training_run_dir

    run = ctx.config
    registered = (run.reg.artifact(run.parent_sha) or {}).get("training_run_dir")
    source = training_run_dir(run.artifact, run.manifest, registered)
    ranges = finetune_ranges(run.cfg, ctx.results["sysid"])
    root = ctx.out / "train"
    robot = run.manifest.robot["name"]
    overrides = {"reward_scales": run.cfg.emphasis.reward_scales(ctx.results["decide"]["drifted"]), **ctx.settings}
    ppo = finetune_config(source, ranges, root, overrides, run.request.seed, ctx.results["ingest"].get("duty"))
    started = find_run(root, robot)  # an interrupted fine-tuning: continue it
    resume = started if started is not None and (started / "checkpoints").is_dir() else None

    def report(iteration: int, total: int) -> None:
        ctx.progress(iteration / total, f"iteration {iteration}/{total}")

    with ProgressWatcher(root, robot, ppo.iterations, report):
        run_dir = train(ppo, resume=resume, show_progress=run.request.show_progress)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "run_dir": str(run_dir),
        "run_id": json.loads((run_dir / "run_info.json").read_text())["run_id"],
        "init_from": ppo.init_from,
        "randomization_ranges": ranges,
        "duty_share": ppo.duty_share,
        "reward_scales": ppo.reward_scales or {},
        "iterations": summary["iteration"],
        "final_eval": summary["final_eval"],
    }


def _tuned(ctx: StageContext, tuned: dict) -> None:
    run = ctx.config
    duty, note = len(ctx.results["ingest"].get("duty") or []), ""
    if tuned.get("duty_share"):
        note = f"; {tuned['duty_share']:.0%} of its command draws from the {duty} commands the logs hold"
    elif (ctx.settings or {}).get("duty_share"):
        note = "; the logs hold no commands: every command draw is the task's"
    if scales := tuned.get("reward_scales"):
        note += "; reward " + ", ".join(f"{term} x{scale:g}" for term, scale in scales.items())
    run.say(f"fine-tuned {tuned['iterations']} iterations from {tuned['init_from']} -> {tuned['run_dir']}{note}")
    run.reg.record(run.retrain_id, training_run=tuned["run_dir"])


def _select(ctx: StageContext) -> dict:
    """ctx.settings: the standard campaign (a name or a YAML path), whose commands the identified twin runs. Every
    checkpoint of the fine-tuning is exported to select/<iteration>/policy and runs that campaign
    (select/<iteration>/campaign); training.retrain.select chooses. Without a drifted KPI (a forced retraining)
    there is nothing to choose on: the last checkpoint is the candidate. The chosen select/<iteration>/ is a run
    directory of one checkpoint, the one a later retraining of the candidate starts from."""
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign
    from training.ppo.checkpoint import checkpoint_path, checkpoints
    from training.ppo.export_hook import export_run
    from training.retrain.select import CheckpointScore, best, drift_left

    run_dir = Path(ctx.results["finetune"]["run_dir"])
    drifted, field_kpis = ctx.results["decide"]["drifted"], ctx.results["ingest"]["field_kpis"]
    found = checkpoints(run_dir) if drifted else checkpoints(run_dir)[-1:]
    campaign = identified_twin_campaign(load_campaign(ctx.settings), determined(ctx.results["sysid"]))
    trust = ctx.config.request.trust.or_signer(ctx.config.request.signing_key)
    scores = []
    for i, (iteration, checkpoint) in enumerate(found):
        where = ctx.work / f"{iteration:06d}"
        artifact = export_run(run_dir, where / "policy", checkpoint)
        if not drifted:
            break

        def report(done: int, total: int, i: int = i, iteration: int = iteration) -> None:
            ctx.progress((i + done / max(total, 1)) / len(found), f"checkpoint {iteration}, {done}/{total} episodes")

        outcome = run_campaign(
            CampaignRequest(artifact, campaign, where / "campaign", promote_verdict=False, trust=trust), report
        )
        means = {k: v["mean"] for k, v in outcome.summary["kpis"].items()}
        scores.append(CheckpointScore(iteration, outcome.passed, means, drift_left(means, field_kpis, drifted)))
    iteration = best(scores).iteration if scores else found[-1][0]
    chosen = ctx.work / f"{iteration:06d}"
    # the candidate's own run directory: its checkpoint beside the run's config and identity, so that retraining
    # it later fine-tunes from this checkpoint (training_run_dir, finetune_config), not from the run's last one
    for name in ("config.yaml", "run_info.json"):
        shutil.copy2(run_dir / name, chosen / name)
    checkpoint_path(chosen, iteration).parent.mkdir()
    shutil.copy2(dict(found)[iteration], checkpoint_path(chosen, iteration))
    return {
        "iteration": iteration,
        "scores": [s.to_dict() for s in scores],
        "drifted": drifted,
        "run_dir": str(ctx.stage_dir("select") / chosen.name),
        "artifact": str(ctx.stage_dir("select") / chosen.name / "policy"),
        "sha256": sha256_file(chosen / "policy" / "policy.onnx"),
    }


def _selected(ctx: StageContext, chosen: dict) -> None:
    from training.retrain.select import CheckpointScore

    run, tuned = ctx.config, ctx.results["finetune"]
    scores = [CheckpointScore.from_dict(s) for s in chosen["scores"]]
    if scores:
        shown = ", ".join(f"{s.iteration} {100 * s.left:.0f}%" + ("" if s.passed else " (fails)") for s in scores)
        run.say(
            f"checkpoint {chosen['iteration']} chosen on the identified twin: the share of the field's "
            f"{', '.join(chosen['drifted'])} left per checkpoint {shown} -> {chosen['artifact']}"
        )
    else:
        run.say(f"checkpoint {chosen['iteration']}, the last (nothing drifted to choose on) -> {chosen['artifact']}")
    run.reg.record(run.retrain_id, new_sha256=chosen["sha256"])
    run.reg.add_artifact(
        chosen["sha256"],
        Path(chosen["artifact"]),
        run.spec.name,
        tuned["run_id"],
        Path(chosen["run_dir"]),
        run.parent_sha,
        run.retrain_id,
    )


def identified_twin_campaign(standard, identified: dict):
    """The standard campaign's commands and gates on one twin: the identified parameters, nominal otherwise (a
    sensor's, such as an encoder offset, is no twin's)."""
    from sim.campaign.config import COMMAND_AXIS
    from sim.randomization import FIELD_KEYS

    axes = {k: [float(v)] for k, v in identified.items() if k in FIELD_KEYS}
    axes[COMMAND_AXIS] = standard.axes[COMMAND_AXIS]
    gates = dataclasses.replace(standard.gates, per_axis={})
    return dataclasses.replace(standard, name=f"{standard.name}-identified-twin", axes=axes, gates=gates)


def _campaigns(ctx: StageContext) -> dict:
    """ctx.settings: the standard campaign of the retraining budget (a name or a YAML path)."""
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import REPORT_FILE, SUMMARY_FILE, CampaignRequest, run_campaign
    from training.retrain.promote import campaign_check

    new, deployed = Path(ctx.results["select"]["artifact"]), ctx.config.artifact
    request = ctx.config.request
    trust = request.trust.or_signer(request.signing_key)
    standard = load_campaign(ctx.settings)
    runs = [
        ("standard", standard, ctx.out / f"campaign-{standard.name}"),
        (
            "identified-twin",
            identified_twin_campaign(standard, determined(ctx.results["sysid"])),
            ctx.out / "campaign-identified-twin",
        ),
    ]
    checks = []
    for i, (kind, cfg, where) in enumerate(runs):

        def report(done: int, total: int, i: int = i, kind: str = kind) -> None:
            ctx.progress((i + done / max(total, 1)) / len(runs), f"{kind} campaign, {done}/{total} episodes")

        outcome = run_campaign(
            CampaignRequest(new, cfg, where, compare_to=deployed, promote_verdict=False, trust=trust), report
        )
        check = campaign_check(kind, outcome.summary).to_dict()
        checks.append(
            {
                **check,
                "summary": str(where / SUMMARY_FILE),
                "report": str(where / REPORT_FILE),
                "summary_sha256": sha256_file(where / SUMMARY_FILE),
                "campaign_file": ctx.settings,
            }
        )
    return {"checks": checks}


def _validated(ctx: StageContext, campaigns: dict) -> None:
    run, sha = ctx.config, ctx.results["select"]["sha256"]
    for c in campaigns["checks"]:
        record = CampaignRecord(
            c["kind"], c["name"], c["passed"], Path(c["summary"]), Path(c["report"]), c["summary_sha256"]
        )
        run.reg.add_campaign(sha, run.retrain_id, record)
        means = ", ".join(
            f"{k} {c['kpi_means'][k]:.3g} (deployed {c['deployed_kpi_means'][k]:.3g})"
            for k in run.cfg.promotion.kpis
            if k in c["kpi_means"] and k in c["deployed_kpi_means"]
        )
        run.say(f"campaign {c['name']}: {'PASS' if c['passed'] else 'FAIL'}; {means}")


def _promote(ctx: StageContext) -> dict:
    from sim.campaign.config import load_campaign
    from training.retrain.promote import CampaignCheck, decide, write_verdict

    new, campaigns = Path(ctx.results["select"]["artifact"]), ctx.results["campaigns"]
    checks = [CampaignCheck.from_dict(c) for c in campaigns["checks"]]
    promoted, reason = decide(checks, ctx.config.cfg.promotion)
    verdict = None
    if promoted:
        standard = next(c for c in campaigns["checks"] if c["kind"] == "standard")
        summary = json.loads(Path(standard["summary"]).read_text())
        verdict = write_verdict(
            new, summary, load_campaign(standard["campaign_file"]), Path(standard["summary"]).parent
        )
    signed_by = None
    if promoted and ctx.config.request.signing_key is not None:
        from edge.signing import sign_artifact

        signed_by = sign_artifact(new, ctx.config.request.signing_key)
    return {"promoted": promoted, "reason": reason, "verdict": verdict, "signed_by": signed_by}


def _promoted(ctx: StageContext, promotion: dict) -> None:
    run = ctx.config
    if promotion["promoted"]:
        run.reg.mark_deployed(ctx.results["select"]["sha256"], run.spec.name)
    run.say(("promoted: " if promotion["promoted"] else "not promoted: ") + promotion["reason"])
    run.reg.record(
        run.retrain_id,
        promoted=int(promotion["promoted"]),
        promotion_reason=promotion["reason"],
        signed_by=promotion.get("signed_by"),
    )


PIPELINE = Pipeline(
    "retrain",
    (
        Stage("ingest", _ingest, "read the field logs, score their KPIs", after=_ingested),
        Stage("decide", _decide, "drift against the campaign baseline", stop=_no_drift, after=_decided),
        Stage("sysid", _sysid, "identify the twin from the logs", after=_identified),
        Stage("finetune", _finetune, "fine-tune on the identified twin", after=_tuned),
        Stage("select", _select, "choose its checkpoint on the identified twin", fresh_dir=True, after=_selected),
        Stage("campaigns", _campaigns, "standard and identified-twin campaigns", after=_validated),
        Stage("promote", _promote, "promote if nothing got worse", after=_promoted),
    ),
)


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
                "detail": f"sha256 {row.get('sha256', '')[:12]}"
                + (f", signed by key {result.signed_by}" if result.signed_by else "")
                + (", deployed" if row.get("deployed") else ""),
            }
        )
    for c in result.campaigns.values():
        steps.append(
            {"kind": "campaign", "ref": c["report"], "detail": f"{c['name']}: " + ("pass" if c["passed"] else "FAIL")}
        )
    return steps
