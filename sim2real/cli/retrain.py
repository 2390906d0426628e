"""`sim2real retrain`: field logs -> drift decision -> system identification -> fine-tuning -> campaigns ->
promotion, once (--logs) or as logs arrive (--watch)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sim2real.cli.keys import add_trust_flags, trust_policy
from sim2real.errors import UserError

if TYPE_CHECKING:
    from sim2real.retrain import RetrainRequest, WatchConfig

HELP = "Retrain from field logs: drift check, system id of the twin, fine-tune, re-validate, promote."
EXAMPLES = """examples:
  sim2real retrain --logs field_logs/ --artifact policy/                 # one shot
  sim2real retrain --logs field_logs/ --artifact policy/ --budget minimal --out runs/retrain/try1
  sim2real retrain --watch field_logs/ --artifact policy/                # as field_recorder finalises segments
  sim2real retrain --logs field_logs/ --artifact policy/ --force         # retrain even without drift
  sim2real retrain --logs robot.bag --artifact policy/ --topic odom=/wheel_controller/odom   # its topic names
  sim2real retrain --logs robot.bag --artifact policy/ --dry-run        # what the logs can tell, nothing trained
  sim2real lineage runs/retrain/try1/train/rover/<stamp>/policy         # where an artifact came from

OUT/retrain.json records every finished stage, which a re-run skips: re-running the same command after an
interruption resumes (fine-tuning from its last checkpoint, campaigns from their results). Watch mode claims
each log (by sha256) in the registry before processing it and marks it done after, so a log is processed once,
also across crashes. Logs: rosbag2 .mcap or .db3, ROS 1 .bag; a KPI a log cannot support (tracking error
without commands, falls without the base orientation) is reported "not measured: <why>" and left out of the
decision. Exit status: 0 promoted or no drift, 1 retrained but not promoted.
"""


# RetrainRequest's fields with a flag, by flag name (None: the field's own); the logs come from --logs or --watch,
# out_dir from --out (its default depends on the mode), topics from --topic (SIGNAL=TOPIC, repeatable)
FLAGS = {
    "artifact": None,
    "budget": None,
    "config": None,
    "trigger": None,
    "registry": None,
    "force": None,
    "seed": None,
    "signing_key": "--sign-key",
}
WATCH_FLAGS = {"debounce_s": "--debounce", "idle_exit_s": "--exit-when-idle", "max_batches": None}  # WatchConfig's


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags
    from sim2real.retrain import RetrainRequest, WatchConfig

    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--logs", metavar="DIR", help="field logs: an .mcap, .db3 or .bag file or a directory of them (one shot)"
    )
    src.add_argument("--watch", metavar="DIR", help="process finalised logs as they appear in DIR")
    add_flags(p, RetrainRequest, FLAGS)
    p.add_argument(
        "--out",
        help="output directory (default runs/retrain/<timestamp>; watch: one subdirectory per "
        "retraining under runs/retrain/watch)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="SIGNAL=TOPIC",
        help="the logs' topic for a signal (cmd_vel, odom, imu, joint_states, joint_commands, foot_forces), e.g. "
        "odom=/wheel_controller/odom; repeatable; on top of the trigger YAML's topics (default: the signal's "
        "own name, namespaced or not)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read the logs and print what they can and cannot tell (each KPI, the trigger's verdict, the replay "
        "windows system identification would fit), then stop: nothing trained, nothing recorded",
    )
    p.add_argument("--json", metavar="FILE", help="write the result(s) as JSON")
    add_trust_flags(p, RetrainRequest, ("trusted_keys",))
    watch = p.add_argument_group("watch mode", "with --watch: how new logs are batched and when watching stops")
    add_flags(watch, WatchConfig, WATCH_FLAGS)


def request_of(args: argparse.Namespace) -> RetrainRequest:
    """The RetrainRequest the arguments give (a flag not given keeps the field's default)."""
    import datetime

    from edge.config import check_values, flag_values
    from sim2real.retrain import RetrainRequest
    from training.retrain.ingest import topic_mapping

    given = check_values(RetrainRequest, flag_values(args, RetrainRequest, FLAGS), name="RetrainRequest")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return RetrainRequest(
        logs=Path(args.logs or args.watch),
        out_dir=Path(args.out or ("runs/retrain/watch" if args.watch else f"runs/retrain/{stamp}")),
        **given,
        trust=trust_policy(args),
        topics=topic_mapping(args.topic),
    )


def watch_config_of(args: argparse.Namespace) -> WatchConfig:
    from edge.config import check_values, flag_values
    from sim2real.retrain import WatchConfig

    return WatchConfig(**check_values(WatchConfig, flag_values(args, WatchConfig, WATCH_FLAGS), name="WatchConfig"))


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console

    from sim2real.cli.console import progress_bar
    from sim2real.retrain import retrain, watch

    console = Console()
    if args.dry_run and args.watch:
        raise UserError("--dry-run reads --logs once; it does not watch")
    request = request_of(args)
    if args.dry_run:
        return _dry_run(request, console)

    def say(line: str) -> None:
        console.print(f"[bold]retrain[/]: {line}", highlight=False)

    with progress_bar("percent", "elapsed", console=console, transient=True) as bar:
        task = bar.add_task("retrain", total=1.0)

        def progress(fraction: float, note: str) -> None:  # the retraining's fraction; the note names the stage
            bar.update(task, completed=fraction, description=note)

        if args.watch:
            results = watch(Path(args.watch), request, watch_config_of(args), say=say, progress=progress)
        else:
            results = [retrain(request, progress, log=say)]
    for r in results:
        _print(console, r)
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=1))
    return 1 if any(r.triggered and not r.promoted for r in results) else 0


def _print(console, r) -> None:
    from rich.table import Table

    from training.retrain.calibration import GyroBias
    from training.retrain.drift import LABELS, FieldKpis

    table = Table(title=f"retraining {r.lineage_id} ({r.out_dir})", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("trigger", ("RETRAIN: " if r.triggered else "no drift: ") + r.reason)
    kpis = FieldKpis(r.field_kpis, r.episodes, r.not_measured)
    table.add_row("field KPIs", "\n".join(f"{LABELS[k]}: {kpis.show(k)}" for k in LABELS))
    table.add_row("gyro bias", GyroBias.from_dict(r.gyro_bias).show())
    if r.identified:
        fits = r.estimates or {k: {"value": v} for k, v in r.identified.items()}  # a run recorded before intervals
        table.add_row("identified", "\n".join(f"{k} = {_estimate(e)}" for k, e in fits.items()))
        table.add_row(
            "trajectory error",
            f"{r.sysid_error_before:.4g} (twin as trained) -> "
            f"{r.sysid_error_after:.4g} (identified); plot {r.sysid_plot}",
        )
    if r.training_run:
        table.add_row("training run", r.training_run)
    if r.checkpoint_scores:
        table.add_row(
            "checkpoint",
            f"{r.selected_iteration}, chosen on the identified twin; field error left per checkpoint: "
            + ", ".join(f"{s['iteration']} {100 * s['left']:.0f}%" for s in r.checkpoint_scores),
        )
    for name, c in r.campaigns.items():
        table.add_row(
            f"campaign {name}",
            ("PASS" if c["passed"] else "FAIL: " + ", ".join(c["failed_checks"])) + f"  ({c['report']})",
        )
    if r.new_artifact:
        table.add_row("promoted" if r.promoted else "not promoted", f"{r.promotion_reason}\n{r.new_artifact}")
    table.add_row("stages", ", ".join(f"{k} {v:.0f} s" for k, v in r.timings.items()))
    console.print(table)


def _estimate(e: dict) -> str:
    """An identified value, its 95% interval, and why the logs do not determine it if they do not."""
    if "low" not in e:
        return f"{e['value']:.4g}"
    text = f"{e['value']:.4g} (95%: {e['low']:.4g} to {e['high']:.4g})"
    return text if e["determined"] else f"{text}, not determined: {e['why']}"


def _dry_run(request: RetrainRequest, console) -> int:
    """What the logs can and cannot tell, before anything trains: per file the topic each signal came from and any
    damage; the IMU's gyro bias against the odometry; each KPI, measured or not and why; the trigger's verdict;
    the replay windows system identification would fit. Nothing is written."""
    from rich.table import Table

    from edge.manifest import load_manifest
    from sim.campaign.rollout import robot_limits
    from sim.robot import load_robot
    from training.retrain.config import RetrainConfig
    from training.retrain.drift import KPI_NEEDS, LABELS, TriggerPolicy, decide, field_kpis, read_calibrated_logs
    from training.retrain.ingest import log_files
    from training.retrain.sysid import log_windows

    manifest = load_manifest(request.artifact)
    baseline = (manifest.campaign_verdict or {}).get("kpi_means")
    if not baseline:
        raise UserError(f"{request.artifact} has no campaign verdict with KPI means: validate it first")
    spec = load_robot(manifest.robot["name"])
    policy = TriggerPolicy.from_yaml(request.trigger)
    files = log_files(Path(request.logs))
    if not files:
        raise UserError(f"no finalised field logs (.mcap, .db3, .bag) in {request.logs}")
    logs, bias = read_calibrated_logs(files, spec, {**policy.topics, **request.topics})
    kpis = field_kpis(logs, robot_limits(spec))
    decision = decide(kpis, baseline, policy)
    sizes = RetrainConfig.from_yaml(request.config).budget(request.budget).sysid
    windows = log_windows(logs, sizes.window_s, sizes.windows)

    table = Table(title=f"what {request.logs} can tell (dry run: nothing trained)", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for f, log in zip(files, logs, strict=True):
        read = ", ".join(f"{signal} <- {topic}" for signal, topic in log.read_as.items()) or "nothing"
        damage = "".join(f"\ndamaged: {d}" for d in log.damage)
        table.add_row(f.name, f"{len(log.t)} steps, {len(log.episodes())} episode(s); {read}{damage}")
    scored = [k for k in KPI_NEEDS if k in kpis.means or k in kpis.not_measured]  # a rover has no gait KPIs
    every = "\n".join(f"{LABELS.get(k, k.replace('_', ' '))}: {kpis.show(k)}" for k in scored)
    table.add_row("gyro bias", f"against the odometry: {bias.show()}")
    table.add_row("field KPIs", every)
    table.add_row("trigger", ("would RETRAIN: " if decision.retrain else "would not retrain: ") + decision.summary())
    table.add_row(
        "system id",
        f"{len(windows)} replay window(s) of {sizes.window_s:g} s"
        if windows
        else "cannot run: it replays joint_commands from states of joint_states and odom, logged together",
    )
    console.print(table)
    return 0
