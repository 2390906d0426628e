"""The eight stages of `sim2real loop`, one function each, in the order they run.

A stage (a sim2real.pipeline Stage) reads what earlier stages handed on (their outputs, sim2real.loop.outputs, as
they read back from loop.json: `Exported.of(ctx)`) and its budget's settings (ctx.settings), does its work under
ctx.out, and returns a StageResult: a verdict, one key figure for the summary table, and its output for the report
and for later stages. A FAIL verdict ends the loop. Each stage is safe to re-run after an interruption: it resumes
its own work where the tool it calls can (PPO from its last checkpoint, the campaign from its results file, RLHF and
retraining per sub-stage) and otherwise starts that stage over.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from edge.signing import TrustPolicy, public_path
from sim2real.errors import UserError
from sim2real.loop.outputs import (
    Analysed,
    Checked,
    Deployed,
    Exported,
    Instructed,
    Retrained,
    StageResult,
    Trained,
    Validated,
)
from sim2real.pipeline import Progress, Stage, StageContext

if TYPE_CHECKING:
    from training.retrain.config import PromotionRule
    from training.retrain.drift import FieldKpis

PASS, WARN, FAIL, SKIPPED = "pass", "warn", "fail", "skipped"


# ---------------------------------------------------------------------------------------------------- 1 train
def train(ctx: StageContext) -> StageResult:
    from sim.robot import load_robot
    from training.ppo import PPOConfig
    from training.ppo import train as ppo_train
    from training.ppo.checkpoint import latest_checkpoint

    legged = bool(load_robot(ctx.config.robot).feet)
    cfg = PPOConfig.for_robot(
        ctx.config.robot,
        **ctx.settings["legged" if legged else "wheeled"],  # the budget's iterations and time cap
        run_root=str(ctx.out / "train"),
        stop_at_threshold=True,
        seed=ctx.config.seed,
        export=False,
        randomization=ctx.config.randomize,
    )
    run_dir = _unfinished_run(ctx.out / "train", latest_checkpoint)
    if run_dir is None or not (run_dir / "summary.json").is_file():
        run_dir = ppo_train(cfg, resume=run_dir, show_progress=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    final = summary.get("final_eval") or {}
    reached = summary.get("threshold")
    figure = (
        f"threshold at iteration {reached['iteration']} ({reached['train_seconds']:.0f} s)"
        if reached
        else f"threshold not reached in {summary['iteration']} iterations"
    )
    if final:
        figure += f"; |vx err| {final.get('vx', float('nan')):.3f} m/s, |wz err| {final.get('wz', float('nan')):.3f}"
    if final.get("trot_index") is not None:
        figure += f"; trot index {final['trot_index']:.2f}, air time {final['mean_air_time_s']:.2f} s"
    return StageResult(
        PASS if reached else WARN,
        figure,
        Trained(
            run_dir=str(run_dir),
            iterations=summary["iteration"],
            env_steps=summary["env_steps"],
            env_steps_per_s=summary["env_steps_per_s"],
            threshold=reached,
            final_eval=final,
            progress_file=str(run_dir / "progress.jsonl"),
        ),
    )


def _unfinished_run(root: Path, latest_checkpoint) -> Path | None:
    """The loop's own training run when an earlier attempt got far enough to leave a checkpoint."""
    runs = sorted(p for p in root.glob("*/*") if p.is_dir() and latest_checkpoint(p) is not None)
    return runs[-1] if runs else None


# --------------------------------------------------------------------------------------------------- 2 export
def registry_path(ctx: StageContext) -> Path:
    """The loop's lineage registry (training.retrain.registry)."""
    return ctx.out / "registry.sqlite"


def signing_key(ctx: StageContext) -> Path:
    """The loop's own ed25519 key (made on first use in the run directory, mode 0600): promotion signs with it,
    the deployed robot trusts its public half, as a fleet would trust the DGX's key."""
    from edge.signing import generate_key

    key = ctx.out / "keys" / "signing.key"
    if not key.is_file():
        generate_key(key)
    return key


def export(ctx: StageContext) -> StageResult:
    from edge.manifest import load_manifest
    from training.ppo.export_hook import export_run
    from training.retrain.registry import Registry

    run_dir = Path(Trained.of(ctx).run_dir)
    artifact = export_run(run_dir, ctx.out / "policy")
    manifest = load_manifest(artifact)
    sha = manifest.policy["sha256"]
    with Registry(registry_path(ctx)) as reg:  # the lineage starts here: this artifact came from that run
        reg.add_artifact(sha, artifact, manifest.robot["name"], manifest.training_run_id, run_dir)
    return StageResult(
        PASS,
        f"policy.onnx {sha[:12]}, {manifest.control_period * 1e3:g} ms period",
        Exported(artifact=str(artifact), sha256=sha),
    )


# ------------------------------------------------------------------------------------------------- 3 validate
def validate(ctx: StageContext) -> StageResult:
    from edge.manifest import load_manifest
    from sim.robot import load_robot

    artifact = Exported.of(ctx).artifact
    legged = bool(load_robot(load_manifest(artifact).robot["name"]).feet)
    campaign_share = 0.8 if legged else 1.0
    outcome = run_gate(
        artifact,
        ctx.settings["campaign"],
        ctx.out / "validation",
        lambda f, note: ctx.progress(campaign_share * f, note),
        signing_key(ctx),
    )
    result = _campaign_result(outcome)
    if not (legged and outcome.passed):
        return result
    terrain = run_gate(
        artifact,
        ctx.settings["terrain_campaign"],
        ctx.out / "validation-terrain",
        lambda f, note: ctx.progress(campaign_share + (1 - campaign_share) * f, f"terrain: {note}"),
        trusted=signing_key(ctx),  # the artifact is promoted (signed) now: re-validation verifies it
    )
    s = terrain.summary
    per_terrain = {a["value"]: 1 - a["failure_rate"] for a in s["axes"].get("terrain", [])}
    shares = ", ".join(f"{name} {100 * share:.0f}%" for name, share in per_terrain.items())
    on_terrain = _campaign_result(terrain).output.to_json() | {"pass_share_per_terrain": per_terrain}
    return StageResult(
        result.verdict if terrain.passed else WARN,
        f"{result.figure}; terrain {'PASS' if terrain.passed else 'FAIL'} ({shares} of episodes pass)",
        dataclasses.replace(result.output, details={"terrain": on_terrain}),
    )


def run_gate(
    artifact: str, campaign: str, out: Path, progress: Progress, key: Path | None = None, trusted: Path | None = None
):
    """The campaign on the artifact: promoted and signed with `key` when it passes; with `trusted` (a private key
    whose public half verifies the artifact) a re-validation that records no verdict."""
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign

    request = CampaignRequest(
        artifact,
        load_campaign(campaign),
        out,
        promote_verdict=trusted is None,
        signing_key=key,
        trust=TrustPolicy([public_path(trusted)] if trusted else ()),
    )
    return run_campaign(request, lambda done, total: progress(done / max(total, 1), f"{done}/{total} episodes"))


def _campaign_result(outcome) -> StageResult:
    from sim.campaign.runner import REPORT_FILE

    s = outcome.summary
    means = {k: v["mean"] for k, v in s["kpis"].items()}
    figure = (
        f"{s['episodes'] - s['failing_episodes']}/{s['episodes']} episodes pass; tracking "
        f"{means.get('tracking_error_lin', float('nan')):.3f} m/s, "
        f"{means.get('tracking_error_ang', float('nan')):.3f} rad/s"
    )
    return StageResult(
        PASS if outcome.passed else FAIL,
        figure,
        Validated(
            passed=outcome.passed,
            summary_file=str(outcome.out_dir / "summary.json"),
            report=str(outcome.out_dir / REPORT_FILE),
            kpi_means=means,
            episodes=s["episodes"],
            failing_episodes=s["failing_episodes"],
        ),
    )


# ---------------------------------------------------------------------------------------------- 4 instruction
def instruction(ctx: StageContext) -> StageResult:
    from sim.robot import load_robot
    from sim2real.rlhf import run_pipeline
    from training.rlhf.execution import wheel_controlled

    # the simulated operator judges plans by what the robot does with them: a robot without the hand-written
    # wheel controller executes them through the policy this loop exported
    policy = None if wheel_controlled(load_robot(ctx.config.robot)) else Exported.of(ctx).artifact
    r = run_pipeline(
        ctx.out / "instruction",
        robot=ctx.config.robot,
        budget=ctx.settings["budget"],
        engine=ctx.config.rlhf_engine,
        progress=ctx.progress,
        policy=policy,
    )
    from edge.signing import sign_artifact

    # the exported model is what instruction_node runs on the robot: it verifies this signature before loading
    signed_by = sign_artifact(r["onnx_dir"], signing_key(ctx))
    # the gate (sim2real.rlhf) chose the deployed model on the validation split; the stage passes when that model
    # meets the budget's floor on held-out
    floor, v = ctx.settings["accuracy_floor"], r["validation"]
    on_target = r["intent_accuracy_deployed"] >= floor and r["json_valid_rate_deployed"] >= 1.0
    scores = f"validation {100 * v['intent_accuracy']:.0f}% vs SFT {100 * v['intent_accuracy_sft']:.0f}%"
    if r["deployed"] == "sft":
        gate = f"SFT deployed: RLHF refused ({scores})"
    elif r.get("rl_checkpoint_iteration") == 0:
        gate = f"no RL checkpoint beat SFT on validation: the SFT weights deployed ({scores})"
    else:
        gate = f"RLHF deployed ({scores})"
    figure = (
        f"held-out intent {100 * r['intent_accuracy_deployed']:.0f}% (floor {100 * floor:.0f}%; RLHF "
        f"{100 * r['intent_accuracy']:.0f}%, SFT {100 * r['intent_accuracy_sft']:.0f}%), phrasing set "
        f"{100 * r['phrasings_accuracy_deployed']:.0f}%; {gate}"
    )
    return StageResult(PASS if on_target else WARN, figure, Instructed.from_json({**r, "signed_by": signed_by}))


# --------------------------------------------------------------------------------------------------- 5 deploy
def deploy(ctx: StageContext) -> StageResult:
    """Two recorded sessions on the field twin: the operator's driving script (/cmd_vel), the evidence drift is
    judged on, then instruction_node executing the instruction script."""
    artifact, logs = Exported.of(ctx).artifact, ctx.out / "field_logs"
    shutil.rmtree(logs, ignore_errors=True)  # a re-run records afresh: an interrupted run's logs are partial
    duty = _field_run(ctx, artifact, logs / "duty", ctx.settings["duty_seconds"], "operator script")
    model = Instructed.of(ctx).onnx_dir  # the exported model: what instruction_node runs on the robot
    seconds = ctx.settings["instruction_seconds"]
    session = _field_run(ctx, artifact, logs / "instructions", seconds, "instruction session", instructions=model)
    executed = session.get("instructions", [])
    figure = f"operator script: {_tracking(duty)}; instructions: {len(executed)} executed, {_tracking(session)}"
    falls = duty["falls"] + session["falls"]
    output = Deployed.from_json({**duty, "logs": str(logs), "instruction_session": session})
    return StageResult(PASS if not falls else WARN, figure, output)


def _field_run(
    ctx: StageContext, artifact: str, record: Path, seconds: float, what: str, instructions: str | None = None
) -> dict:
    """`seconds` of the artifact on the hidden-parameter field twin over real ROS 2, recorded to MCAP: the
    operator's driving script, or with `instructions` (a model directory) instruction_node running the instruction
    script."""
    from sim2real.sil import SilRequest, run_sil

    cfg = ctx.config
    request = SilRequest(
        artifact,
        seconds,
        field_twin=cfg.field_twin,
        commands=cfg.duty,
        record=str(record),
        instructions=cfg.instructions if instructions else None,
        instruction_model=instructions,
        instruction_backend=cfg.instruction_backend,
        trust=TrustPolicy([public_path(signing_key(ctx))]),  # the robot runs only what the loop's promotion signed
    )
    return run_sil(request, lambda t: ctx.progress(t / seconds, f"{what}: {t:.1f}/{seconds:g} s simulated"))


def _tracking(summary: dict) -> str:
    return f"tracking {summary['tracking_error_lin']:.3f} m/s, {summary['tracking_error_ang']:.3f} rad/s"


# -------------------------------------------------------------------------------------------------- 6 analyse
def analyse(ctx: StageContext) -> StageResult:
    from edge.manifest import load_manifest
    from training.retrain.drift import TriggerPolicy, decide

    manifest = load_manifest(Exported.of(ctx).artifact)
    logs = Path(Deployed.of(ctx).logs)
    # the decision rests on the operator's driving: the instruction session is short plans and standing still,
    # which would dilute the means; its KPIs are reported beside
    duty, damage, files = log_kpis(logs / "duty", manifest)
    session, session_damage, session_files = log_kpis(logs / "instructions", manifest)
    duty_kpis, session_kpis, episodes = duty.means, session.means, duty.episodes
    baseline = manifest.campaign_verdict["kpi_means"]
    decision = decide(duty, baseline, TriggerPolicy.from_yaml())
    figure = ("drift: " if decision.retrain else "no drift: ") + decision.summary()
    if "trot_index" in duty_kpis:  # a legged robot's logs carry its foot forces
        figure += (
            f"; field gait: trot index {duty_kpis['trot_index']:.2f}, air time {duty_kpis['mean_air_time_s']:.2f} s"
        )
    return StageResult(
        WARN if decision.retrain else PASS,
        figure,
        Analysed(
            retrain=decision.retrain,
            reasons=decision.reasons,
            drifted=decision.drifted,
            duty_kpis=duty_kpis,
            instruction_session_kpis=session_kpis,
            baseline_kpis=baseline,
            episodes=episodes,
            files=files + session_files,
            damage=damage + session_damage,
        ),
    )


def log_kpis(path: Path, manifest) -> tuple[FieldKpis, list[str], list[str]]:
    """The KPIs of every episode of the field logs under `path` (the campaign's KPI code), the damaged spans and
    the files read."""
    from sim.robot import load_robot
    from training.retrain.drift import FieldKpis, ingest_logs
    from training.retrain.ingest import log_files

    files = log_files(path)
    if not files:
        raise UserError(f"no field logs in {path}")
    read = ingest_logs(files, load_robot(manifest.robot["name"]))
    return (
        FieldKpis.from_ingest(read),
        [d for log in read["logs"] for d in log["damage"]],
        [str(f) for f in files],
    )


# -------------------------------------------------------------------------------------------------- 7 retrain
def retrain(ctx: StageContext) -> StageResult:
    if not Analysed.of(ctx).retrain:
        return StageResult(SKIPPED, "no drift detected: the deployed artifact stays", Retrained(promoted=False))
    from sim2real.retrain import RetrainRequest
    from sim2real.retrain import retrain as run_retrain

    request = RetrainRequest(
        Path(Deployed.of(ctx).logs) / "duty",  # the evidence the trigger fired on
        Path(Exported.of(ctx).artifact),
        ctx.out / "retrain",
        budget=ctx.settings["budget"],
        registry=registry_path(ctx),
        signing_key=signing_key(ctx),
    )
    result = run_retrain(request, ctx.progress)
    loose = {k for k, e in result.estimates.items() if not e["determined"]}
    identified = ", ".join(
        f"{k} {v:.3g}" + (" (not determined)" if k in loose else "") for k, v in result.identified.items()
    )
    verdict = "promoted" if result.promoted else f"not promoted ({result.promotion_reason})"
    scored = [s["iteration"] for s in result.checkpoint_scores]
    chosen = f"checkpoint {result.selected_iteration}" + (
        f" of {scored[0]}-{scored[-1]} chosen on the identified twin" if scored else ""
    )
    output = Retrained.from_json(result.to_dict())
    return StageResult(PASS if result.promoted else WARN, f"identified {identified}; {chosen}; {verdict}", output)


# ---------------------------------------------------------------------------------------------------- 8 final
def worse_elsewhere(
    before: dict[str, float], after: dict[str, float], drifted: list[str], rule: PromotionRule
) -> dict[str, list[float]]:
    """The KPIs the promotion rule compares that did not drift and got worse in the field by more than its min_abs:
    KPI -> [before, after]."""
    return {
        kpi: [before[kpi], after[kpi]]
        for kpi in rule.kpis
        if kpi not in drifted and kpi in before and kpi in after and after[kpi] - before[kpi] > rule.min_abs
    }


def final(ctx: StageContext) -> StageResult:
    """The artifact in service (promoted, or the original one) drives the operator's script on the same field
    twin again: how much of the field-vs-campaign gap of each drifted KPI retraining closed. A promoted artifact that
    made a drifted KPI worse in the field is rolled back: the one it replaced is deployed again. A KPI the promotion
    rule compares that did not drift but got worse in the field is named, and the stage warns: no campaign that
    judged the promotion drives the operator's script on the field robot."""
    from edge.manifest import load_manifest
    from edge.validation import require_validated
    from training.retrain.config import RetrainConfig

    retrained, analysed = Retrained.of(ctx), Analysed.of(ctx)
    promoted = retrained.promoted
    artifact = str(retrained.new_artifact if promoted else Exported.of(ctx).artifact)
    require_validated(load_manifest(artifact), artifact_dir=artifact)
    logs = ctx.out / "field_logs_final"
    shutil.rmtree(logs, ignore_errors=True)
    run = _field_run(ctx, artifact, logs, ctx.settings["duty_seconds"], "operator script")
    after = log_kpis(logs, load_manifest(artifact))[0].means
    before, baseline = analysed.duty_kpis, analysed.baseline_kpis
    closed = {}
    for kpi in analysed.drifted:
        gap = before[kpi] - baseline[kpi]
        closed[kpi] = (before[kpi] - after[kpi]) / gap if gap > 1e-9 else None
    figure = f"{'retrained' if promoted else 'original'} artifact: {_tracking(run)}"
    figure += "".join(
        f"; {kpi}: {before[kpi]:.3f} -> {after[kpi]:.3f} (campaign {baseline[kpi]:.3f}), "
        f"{100 * c:.0f}% of the gap closed"
        for kpi, c in closed.items()
        if c is not None
    )
    worse = worse_elsewhere(before, after, analysed.drifted, RetrainConfig.from_yaml().promotion)
    figure += "".join(f"; {kpi} worse in the field: {b:.3f} -> {a:.3f}" for kpi, (b, a) in worse.items())
    rolled_back = promoted and any(c is not None and c < 0 for c in closed.values())
    if rolled_back:
        figure += f"; worse in the field: rolled back, {roll_back(ctx)} in service again"
    met = all(c is None or c >= 0.5 for c in closed.values())
    verdict = PASS if not run["falls"] and met and not worse else WARN
    return StageResult(
        verdict,
        figure,
        Checked.from_json(
            {
                **run,
                "artifact": artifact,
                "promoted": bool(promoted),
                "logs": str(logs),
                "field_kpis": after,
                "gap_closed": closed,
                "worse_elsewhere": worse,
                "rolled_back": rolled_back,
            }
        ),
    )


def roll_back(ctx: StageContext) -> str:
    """The artifact the loop exported is the deployed one of its robot again in the loop's registry (the promoted
    one stays registered, with its campaigns, and is no longer deployed); returns its policy's short hash."""
    from training.retrain.registry import Registry

    sha = Exported.of(ctx).sha256
    with Registry(registry_path(ctx)) as reg:
        reg.mark_deployed(sha, reg.artifact(sha)["robot"])
    return sha[:12]


def failed(ctx: StageContext, result: dict) -> bool:
    """A FAIL ends the loop: a later stage would need what this one did not produce."""
    return result["verdict"] == FAIL


STAGES = tuple(
    Stage(name, run, description, stop=failed)
    for name, run, description in (
        ("train", train, "PPO in batched digital twins"),
        ("export", export, "ONNX artifact + manifest"),
        ("validate", validate, "scenario campaign gate"),
        ("instruction", instruction, "instruction model: SFT + RLHF with vLLM"),
        ("deploy", deploy, "software in the loop over ROS 2 on the field twin"),
        ("analyse", analyse, "field-log KPIs and drift"),
        ("retrain", retrain, "system id, fine-tune, re-validate, promote"),
        ("final", final, "deployment check of the artifact in service"),
    )
)
STAGE_NAMES = [s.name for s in STAGES]
