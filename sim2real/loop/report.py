"""The loop's report: one self-contained HTML file (PNG plots embedded), rewritten after every stage.

Sections: the stage table, training curves, the validation campaign (heatmaps; the full campaign report is
linked), the instruction model, field vs campaign KPIs before and after retraining, the system-id fit, and the
lineage of the artifact in service. A stage that has not run yet shows as such.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

from edge.fileio import atomic_write_bytes
from sim.campaign.report import STYLE, axis_heatmap, html_table, img_tag
from sim.field_robot import load_field_robot
from sim.kpis import GAIT_KPIS
from sim.randomization import NOMINAL
from sim2real.loop.outputs import (
    Analysed,
    Checked,
    Deployed,
    Exported,
    Instructed,
    Retrained,
    Trained,
    Validated,
)

LOOP_STYLE = (
    STYLE
    + """
.warn { background: #ef6c00; } .skipped { background: #757575; } .pending { background: #9e9e9e; }
td.verdict { text-align: center; } td:last-child { white-space: nowrap; } .note { color: #555; font-size: 14px; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
"""
)


def write_report(out: Path, run) -> Path:
    """The report of `run` (sim2real.pipeline.Run of the loop) into out/report.html."""
    import matplotlib

    matplotlib.use("Agg")
    stages = run.results  # stage -> {verdict, figure, data}
    parts = [_header(run), _stage_table(stages, run.seconds)]
    for section in (_training, _campaign, _instruction, _field, _sysid, _lineage):
        parts.append(section(stages, out))
    data = json.dumps(run.body(), indent=1, default=str)
    embedded = data.replace("</", "<\\/")  # a "</script>" inside a string must not end the script element
    parts += [
        "<h2>Data</h2>",
        f"<details><summary>loop.json</summary><pre>{html.escape(data)}</pre></details>",
        f'<script type="application/json" id="loop-state">{embedded}</script>',
    ]
    doc = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>sim2real loop: {html.escape(run.config['robot'])}"
        f"</title><style>{LOOP_STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )
    path = out / "report.html"
    atomic_write_bytes(path, doc.encode())
    return path


def _badge(verdict: str) -> str:
    return f'<span class="badge {html.escape(verdict)}">{html.escape(verdict.upper())}</span>'


def _header(run) -> str:
    from sim2real.loop.stages import FAIL, STAGE_NAMES

    failed = [n for n, s in run.results.items() if s["verdict"] == FAIL]
    if failed:
        overall = "fail"
    elif all(n in run.results for n in STAGE_NAMES):
        overall = "pass"
    else:
        overall = "pending"
    cfg = run.config
    return (
        f"<h1>sim2real loop {_badge(overall)}</h1><p class='meta'>robot <code>{html.escape(cfg['robot'])}</code>, "
        f"budget <code>{cfg['budget']}</code>, run directory <code>{html.escape(cfg['out'])}</code>, "
        f"field twin <code>{html.escape(Path(cfg['field_twin']).name)}</code>"
        + (f"; stopped at <b>{html.escape(failed[0])}</b>" if failed else "")
        + "</p>"
    )


def _stage_table(stages: dict, seconds: dict[str, float]) -> str:
    from sim2real.loop.stages import STAGES

    rows = []
    for stage in STAGES:
        s = stages.get(stage.name)
        verdict = _badge(s["verdict"]) if s else _badge("pending")
        figure = html.escape(s["figure"]) if s else ""
        took = f"{seconds[stage.name]:.0f} s" if s else ""
        rows.append(
            f"<tr><td><b>{stage.name}</b><br><span class='note'>{html.escape(stage.description)}</span></td>"
            f"<td class='verdict'>{verdict}</td><td style='text-align:left'>{figure}</td>"
            f"<td>{took}</td></tr>"
        )
    total = sum(seconds.values())
    return (
        "<h2>Stages</h2><table><tr><th>stage</th><th>verdict</th><th>key figure</th><th>time</th></tr>"
        + "".join(rows)
        + f"<tr><td>total</td><td></td><td></td><td>{total:.0f} s</td></tr></table>"
    )


def _pending(title: str) -> str:
    return f"<h2>{title}</h2><p class='note'>not run yet</p>"


def _training(stages: dict, out: Path) -> str:
    import matplotlib.pyplot as plt

    trained = Trained.recorded(stages)
    if trained is None:
        return _pending("Training")
    rows = [json.loads(line) for line in Path(trained.progress_file).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("type") == "iteration"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    it = [r["iteration"] for r in rows]
    ax1.plot(it, [r.get("Episode/return", float("nan")) for r in rows])
    ax1.set(title="episode return", xlabel="iteration")
    for key, label in (("Tracking/vx_error", "|vx error| m/s"), ("Tracking/wz_error", "|wz error| rad/s")):
        ax2.plot(it, [r.get(key, float("nan")) for r in rows], label=label)
    ax2.set(title="tracking error (training batch)", xlabel="iteration")
    ax2.legend()
    fig.tight_layout()
    reached = trained.threshold
    note = (
        f"evaluation threshold reached at iteration {reached['iteration']} after {reached['train_seconds']:.0f} s"
        if reached
        else "evaluation threshold not reached"
    )
    return (
        f"<h2>Training</h2><p class='note'>{trained.iterations} iterations, {trained.env_steps:,} env-steps at "
        f"{trained.env_steps_per_s or 0:,.0f} env-steps/s; {note}. Run: <code>{html.escape(trained.run_dir)}</code>"
        "</p>" + img_tag(fig, "training curves")
    )


def _campaign(stages: dict, out: Path) -> str:
    from sim.campaign.config import load_campaign

    validated = Validated.recorded(stages)
    if validated is None:
        return _pending("Validation campaign")
    summary = json.loads(Path(validated.summary_file).read_text())
    cfg = load_campaign(summary["campaign"])
    names = list(summary["kpis"])
    # relative to the report: a run directory moved or copied after its campaign links to where the campaign wrote
    link = html.escape(os.path.relpath(Path(validated.report).resolve(), out.resolve()))
    episodes, passing = validated.episodes, validated.episodes - validated.failing_episodes
    parts = [
        f"<h2>Validation campaign {_badge('pass' if validated.passed else 'fail')}</h2>",
        f"<p class='note'>{passing}/{episodes} episodes within the gates; "
        f"full report with worst-case trajectories: <a href='{link}'>{link}</a></p>",
        html_table(
            ["KPI", "mean", "gate"],
            [[k, v["mean"], str(cfg.gates.kpis.get(k, "-"))] for k, v in summary["kpis"].items()],
        ),
    ]
    parts.append("<div class='grid'>")
    for axis, entries in summary["axes"].items():
        parts.append(img_tag(axis_heatmap(axis, entries, names, cfg), f"heatmap: {axis}"))
    return "".join(parts) + "</div>"


def _instruction(stages: dict, out: Path) -> str:
    import matplotlib.pyplot as plt

    model = Instructed.recorded(stages)
    if model is None:
        return _pending("Instruction model")
    sft_valid = model.eval.get("json_valid_rate_sft", float("nan"))
    fig, ax = plt.subplots(figsize=(6, 2.8))
    labels = ["intent accuracy", "JSON valid"]
    ax.bar([0, 2], [model.intent_accuracy_sft, sft_valid], label="SFT")
    ax.bar([0.8, 2.8], [model.intent_accuracy, model.json_valid_rate], label="RLHF")
    ax.axhline(0.9, color="grey", ls="--", lw=1)
    ax.set_xticks([0.4, 2.4], labels)
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower right")
    v, said = model.validation, model.phrasings
    rows = [
        ["intent accuracy (held-out)", model.intent_accuracy_sft, model.intent_accuracy],
        ["intent accuracy (phrasing set)", said.get("intent_accuracy_sft", "-"), said.get("intent_accuracy", "-")],
        ["intent accuracy (validation: the gate)", v.get("intent_accuracy_sft", "-"), v.get("intent_accuracy", "-")],
        ["JSON-valid rate", sft_valid, model.json_valid_rate],
        ["RLHF wins over SFT (reward model)", "-", _or_dash(model.win_rate_rm)],
        ["RLHF wins over SFT (simulated operator)", "-", _or_dash(model.win_rate_operator)],
    ]
    deployed_dir = model.model_dir if model.deployed_dir is None else model.deployed_dir
    return (
        "<h2>Instruction model</h2><p class='note'>held-out paraphrases; the RLHF model generates with "
        f"vLLM during RL. Deployed (the gate: RLHF only if not worse than SFT on validation): "
        f"<b>{model.deployed.upper()}</b>, <code>{html.escape(str(deployed_dir))}</code></p>"
        + html_table(["metric", "SFT", "RLHF"], rows)
        + img_tag(fig, "instruction accuracy")
    )


def _or_dash(value):
    return "-" if value is None else value


def _field(stages: dict, out: Path) -> str:
    import matplotlib.pyplot as plt

    a = Analysed.recorded(stages)
    if a is None:
        return _pending("Field vs campaign KPIs")
    keys = ["tracking_error_lin", "tracking_error_ang"]
    series = {
        "campaign (twin)": [a.baseline_kpis.get(k, float("nan")) for k in keys],
        "field, operator script": [a.duty_kpis[k] for k in keys],
        "field, instruction session": [a.instruction_session_kpis[k] for k in keys],
    }
    final = Checked.recorded(stages)
    if final:
        label = "field, operator script, retrained" if final.promoted else "field, operator script, again"
        series[label] = [final.field_kpis[k] for k in keys]
    fig, ax = plt.subplots(figsize=(8, 3))
    width = 0.8 / len(series)
    ax.set_title("KPI means (the trigger compares the operator script's with the campaign's)", fontsize=10)
    for i, (label, values) in enumerate(series.items()):
        ax.bar([j + i * width for j in range(len(keys))], values, width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(keys))], ["tracking error lin (m/s)", "yaw rate (rad/s)"])
    ax.legend(fontsize=8)
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in a.reasons) or "<li>no drift</li>"
    damage = "".join(f"<li>{html.escape(x)}</li>" for x in a.damage)
    gait = _field_gait(a, final)
    closed = "".join(
        f"<li>{html.escape(k)}: {100 * c:.0f}% of the field-vs-campaign gap closed</li>"
        for k, c in (final.gap_closed if final else {}).items()
        if c is not None
    ) + "".join(
        f"<li>{html.escape(k)}: worse in the field, {b:.3f} -> {a:.3f} (it did not drift)</li>"
        for k, (b, a) in (final.worse_elsewhere if final else {}).items()
    )
    return (
        "<h2>Field vs campaign KPIs</h2><p class='note'>field = the hidden-parameter field twin over ROS 2 "
        f"(sim_bridge_node), KPIs from the recorded MCAP logs with the campaign's KPI code; the trigger compares "
        f"the operator script's ({a.episodes} episodes) with the campaign means in the manifest</p>"
        f"<ul>{reasons}</ul>"
        + (f"<p>damaged log spans:</p><ul>{damage}</ul>" if damage else "")
        + html_table(["", *keys], [[k, *v] for k, v in series.items()])
        + img_tag(fig, "field vs campaign KPIs")
        + gait
        + (f"<p>after retraining:</p><ul>{closed}</ul>" if closed else "")
    )


def _field_gait(analysed: Analysed, final: Checked | None) -> str:
    """The gait KPIs of the field logs beside the campaign's: a table, or "" when the logs carry no foot forces."""
    keys = [k for k in GAIT_KPIS if k in analysed.duty_kpis]
    if not keys:
        return ""
    rows = [
        ["campaign (twin)", *(analysed.baseline_kpis.get(k, float("nan")) for k in keys)],
        ["field, operator script", *(analysed.duty_kpis[k] for k in keys)],
        ["field, instruction session", *(analysed.instruction_session_kpis.get(k, float("nan")) for k in keys)],
    ]
    if final:
        rows.append(
            ["field, operator script, after retraining", *(final.field_kpis.get(k, float("nan")) for k in keys)]
        )
    return "<p>gait (foot contacts from /foot_forces):</p>" + html_table(["", *keys], rows)


def _sysid(stages: dict, out: Path) -> str:
    from training.retrain.calibration import GyroBias

    r = Retrained.recorded(stages)
    if r is None:
        return _pending("System identification")
    if stages["retrain"]["verdict"] == "skipped":
        return "<h2>System identification</h2><p class='note'>not needed: no drift</p>"
    field_twin = Path(Deployed.recorded(stages).field_twin)
    robot = load_field_robot(field_twin) if field_twin.is_file() else None
    # a parameter the field YAML leaves out is the twin's nominal value, not unknown
    hidden = {**NOMINAL, **robot.hidden, "encoder_offset": robot.effects.encoder_offset_rad} if robot else {}
    estimates = r.estimates or {k: {"value": v} for k, v in r.identified.items()}
    rows = [[k, e["value"], _interval(e), str(hidden.get(k, "-"))] for k, e in estimates.items()]
    # the IMU's bias, identified against the odometry (training.retrain.calibration), beside the field robot's
    for i, (k, e) in enumerate(GyroBias.from_dict(r.gyro_bias).axes.items()):
        rows.append(
            [f"{k} (rad/s)", e.value, _interval(e.to_dict()), str(robot.effects.gyro_bias[i]) if robot else "-"]
        )
    before, after = r.sysid_error_before, r.sysid_error_after
    fit = ""
    if before is not None and after is not None:
        fit = (
            f"<p>trajectory error of the twin replaying the logged commands: {before:.4g} before, {after:.4g} "
            f"after identification ({100 * (1 - after / before):.0f}% lower)</p>"
        )
    img = img_tag(_sysid_figure(r.identified, hidden, before, after), "system id fit") if r.identified else ""
    plot = r.sysid_plot  # the retraining's own figure: logged velocities beside both twins' replays
    if plot and Path(plot).is_file():
        img += f"<img alt='replayed trajectories' src='data:image/png;base64,{_b64(Path(plot))}'>"
    chosen = ""
    if r.checkpoint_scores:  # the fine-tuning's checkpoints on the identified twin (training.retrain.select)
        scored = [
            [
                str(s["iteration"]) + (" (chosen)" if s["iteration"] == r.selected_iteration else ""),
                f"{100 * s['left']:.0f}%",
                "pass" if s["passed"] else "FAIL",
            ]
            for s in r.checkpoint_scores
        ]
        chosen = "<p>the fine-tuning's checkpoints on the identified twin:</p>" + html_table(
            ["checkpoint", "field error of the drifted KPIs left", "gates"], scored
        )
    verdicts = r.campaigns
    camp = (
        html_table(["campaign", "passed"], [[k, "pass" if v.get("passed") else "FAIL"] for k, v in verdicts.items()])
        if verdicts
        else ""
    )
    return (
        "<h2>System identification and retraining</h2>"
        + html_table(["parameter", "identified", "95% interval", "hidden (field twin)"], rows)
        + fit
        + img
        + chosen
        + camp
        + f"<p>{'promoted' if r.promoted else 'not promoted'}: {html.escape(str(r.promotion_reason))}</p>"
    )


def _interval(estimate: dict) -> str:
    """The 95% interval, or why the logs do not determine the parameter."""
    if "low" not in estimate:
        return "not measured"
    span = f"{estimate['low']:.4g} to {estimate['high']:.4g}"
    return span if estimate["determined"] else f"{span}: not determined ({estimate['why']})"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _sysid_figure(identified: dict, hidden: dict, before: float | None, after: float | None):
    import matplotlib.pyplot as plt

    names = list(identified)
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(2.2 * (len(names) + 1), 2.6))
    for ax, name in zip(axes, names, strict=False):
        values = [identified[name], float(hidden.get(name, float("nan")))]
        ax.bar(["identified", "hidden"], values, color=["#1976d2", "#9e9e9e"])
        ax.set_title(name, fontsize=10)
    axes[-1].bar(["before", "after"], [before or float("nan"), after or float("nan")], color=["#c62828", "#2e7d32"])
    axes[-1].set_title("replay error", fontsize=10)
    fig.tight_layout()
    return fig


def _lineage(stages: dict, out: Path) -> str:
    final = Checked.recorded(stages)
    if final is None:
        return _pending("Lineage of the artifact in service")
    retrained = Retrained.recorded(stages)
    exported = Exported.recorded(stages)
    if final.rolled_back and exported:  # the retrained artifact made the field worse: the first one is back
        artifact, chain = exported.artifact, []
        first = "the first artifact, in service again: the retrained one made the field worse and was rolled back"
    else:
        artifact, chain = final.artifact, (retrained.lineage if retrained else None) or []
        first = "the first artifact: trained and validated by this run (stages above)"
    rows = [[str(step.get("kind", "")), str(step.get("ref", "")), str(step.get("detail", ""))] for step in chain]
    return (
        f"<h2>Lineage of the artifact in service</h2><p class='note'><code>{html.escape(str(artifact))}</code>"
        "</p>" + (html_table(["step", "what", "detail"], rows) if rows else f"<p class='note'>{html.escape(first)}</p>")
    )
