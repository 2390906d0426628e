"""The whole RLHF pipeline in one call, for `sim2real loop`: SFT -> simulated-operator preferences -> reward model ->
RL (vLLM generating) -> evaluation of the RLHF model against the SFT model and the gate -> the deployed model
exported for the robot (ONNX Runtime, what instruction_node runs).

The gate: the RLHF model is deployed only if its intent accuracy on the validation split (the lines RL chose its
checkpoint on, <out>/rl/validation.jsonl; never the held-out set) is at least the SFT model's; otherwise the SFT
model is deployed and the eval stage prints a WARN line with both figures. Both figures, the decision and both
models' held-out figures are in the result (and in <out>/rlhf.json). Libraries' logging (vLLM, transformers, torch)
goes to <out>/libraries.log, not the console.

    run_pipeline(Path("runs/loop/instruction"), robot="rover", budget="quick") -> dict

Six stages on the one Stage runner (sim2real.pipeline), each a fresh-dir stage: it builds `<out>/<stage>.partial/`,
its record (stats and seconds) goes into `stage.json` there, and the directory is renamed to `<out>/<stage>/`, so
a model directory exists under its final name only when complete. A stage whose directory holds stage.json is
skipped on the next call; a leftover `.partial` directory (an interrupted run) is discarded and the stage redone;
a directory without stage.json is never overwritten. `<out>/rlhf.json` lists every finished stage.

Budgets (config/rlhf/budgets.yaml; what a budget buys on a 2-core CPU; docs/results/rlhf.md has the measured runs):
- `minimal`: the CI end-to-end test, about 2 minutes, the scratch model; the figures only show that every stage ran.
- `quick`: about 6 minutes, the scratch model (SFT from the pretrained base does not fit the loop's envelope).
- `full`: config/rlhf/<stage>.yaml as they are: SFT from the SmolLM2-135M-Instruct base.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from edge.config import load_dataclass, setting
from edge.fileio import read_yaml_mapping
from sim2real.errors import UserError
from sim2real.library_logs import LOG_FILE, library_logs
from sim2real.pipeline import Budget, Pipeline, Progress, Stage, StageContext
from training.rlhf.config import (
    ENGINES,
    RLHF_CONFIG_DIR,
    PrefsConfig,
    RewardConfig,
    RLConfig,
    SFTConfig,
    load_config,
)

HELDOUT = RLHF_CONFIG_DIR / "heldout.jsonl"
# instructions written the way different people talk (terse, polite, capitals, typos, "a bit", chains): scored
# beside held-out, never trained or selected on (tests/test_phrasing_set.py)
PHRASINGS = RLHF_CONFIG_DIR / "phrasings.jsonl"
BUDGETS_FILE = RLHF_CONFIG_DIR / "budgets.yaml"


@dataclass
class BudgetEntry:
    """One budget of config/rlhf/budgets.yaml."""

    settings: dict[str, dict] = setting({}, "per stage: overrides of config/rlhf/<stage>.yaml")
    expected_s: dict[str, float] = setting({}, "seconds each stage is expected to take", ge=0)
    torch_threads: int = setting(
        0, "torch's intra-op threads while the pipeline runs, whatever the process set before (0: every core)", ge=0
    )


@dataclass(frozen=True)
class RLHFBudget(Budget):
    torch_threads: int = 0  # BudgetEntry.torch_threads


@contextlib.contextmanager
def torch_threads(count: int):
    """torch's intra-op thread count for the block (0: every core), the caller's restored after it. A budget fixes
    its own: the loop's PPO stage leaves 1, a bare process has every core, and a small model trains at its own
    pace on one thread only (docs/results/rlhf.md)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count or os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_budgets(path: Path = BUDGETS_FILE) -> dict[str, RLHFBudget]:
    """The budgets a YAML file names, checked (each stage's settings are checked again by the stage's config)."""
    raw = read_yaml_mapping(path, UserError, "RLHF budgets", "expected a mapping of budget names")
    budgets = {}
    for name, values in raw.items():
        entry = load_dataclass(BudgetEntry, values, error=UserError, name=f"{path}: {name}")
        unknown = sorted((set(entry.settings) | set(entry.expected_s)) - set(PIPELINE.names))
        if unknown:
            raise UserError(
                f"{path}: {name}: unknown stage(s) {', '.join(unknown)} (stages: {', '.join(PIPELINE.names)})"
            )
        budgets[name] = RLHFBudget(name, entry.settings, entry.expected_s, entry.torch_threads)
    return budgets


@dataclass(frozen=True)
class RLHFRun:
    robot: str  # whose command limits the plans respect and whose twin the simulated operator drives
    engine: str  # what generates the RL samples: vllm or transformers
    policy: str | None = None  # the policy artifact that executes plans in the twin (None: the wheel controller)


def run_pipeline(
    out_dir: Path,
    robot: str = "rover",
    budget: str = "quick",
    engine: str = "vllm",
    progress: Progress | None = None,
    overrides: dict[str, dict] | None = None,
    policy: str | None = None,
) -> dict:
    """Run (or resume) every stage into `out_dir`; returns a JSON-able summary:
    {model_dir (RL's output), sft_dir, reward_dir, deployed ("rlhf" or "sft": the gate's decision), deployed_dir,
    onnx_dir (the deployed model exported: what instruction_node runs), intent_accuracy (RLHF, held-out),
    intent_accuracy_sft, intent_accuracy_deployed, json_valid_rate_deployed, rl_checkpoint_iteration (what RL wrote:
    0 is the SFT weights), validation {set, n, intent_accuracy, intent_accuracy_sft}, phrasings {set, n,
    intent_accuracy, intent_accuracy_sft, json_valid_rate} (PHRASINGS), phrasings_accuracy_deployed, json_valid_rate,
    win_rate_rm, win_rate_operator, stages: {name: seconds}} (stage seconds as measured when the stage ran).
    `progress` gets the pipeline's fraction done and a note such as "sft: step 120". `overrides`: per stage,
    settings on top of the budget's (e.g. {"rl": {"advantage": "dr_grpo"}}). `policy`: the robot's policy artifact
    that executes the plans in its twin, for a robot without the hand-written wheel controller
    (training.rlhf.execution)."""
    if budget not in BUDGETS:
        raise UserError(f"unknown RLHF budget {budget!r}: choose one of {', '.join(BUDGETS)}")
    if engine not in ENGINES:
        raise UserError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    out = Path(out_dir)
    record = {"robot": robot, "budget": budget, "engine": engine, "policy": policy}
    chosen = BUDGETS[budget]
    if overrides:
        settings = {k: {**v, **overrides.get(k, {})} for k, v in chosen.settings.items()}
        chosen = dataclasses.replace(chosen, settings={**overrides, **settings})
    # the libraries' lines go to the run's log file, not the console
    with library_logs(out / LOG_FILE), torch_threads(chosen.torch_threads):
        run = PIPELINE.open(out, record).execute(RLHFRun(robot, engine, policy), chosen, progress)
    e = run.results["eval"]
    rlhf = e["deployed"] == "rlhf"
    return {
        "model_dir": str(out / "rl"),
        "deployed": e["deployed"],
        "deployed_dir": str(out / ("rl" if rlhf else "sft")),
        "intent_accuracy_deployed": e["intent_accuracy" if rlhf else "intent_accuracy_sft"],
        "json_valid_rate_deployed": e["json_valid_rate" if rlhf else "json_valid_rate_sft"],
        "validation": e["validation"],
        "phrasings": e["phrasings"],
        "phrasings_accuracy_deployed": e["phrasings"]["intent_accuracy" if rlhf else "intent_accuracy_sft"],
        # 0: no RL checkpoint beat SFT on validation, so RL's output holds the SFT weights
        "rl_checkpoint_iteration": run.results["rl"].get("checkpoint_iteration"),
        "sft_dir": str(out / "sft"),
        "reward_dir": str(out / "reward"),
        "onnx_dir": str(out / "onnx"),
        "intent_accuracy": e["intent_accuracy"],
        "intent_accuracy_sft": e["intent_accuracy_sft"],
        "json_valid_rate": e["json_valid_rate"],
        "win_rate_rm": e["win_rate_rm"],
        "win_rate_operator": e["win_rate_operator"],
        "stages": run.seconds,
        "budget": budget,
        "eval": e,
    }


def _sft(ctx: StageContext) -> dict:
    from training.rlhf.sft import train_sft

    config = _config(SFTConfig, "sft", ctx.settings, out=str(ctx.work), robot=ctx.config.robot)
    return train_sft(config, lambda step, loss: ctx.progress(step / config.steps, f"step {step}"))


def _prefs(ctx: StageContext) -> dict:
    from training.rlhf.prefs import collect_pairs

    config = _config(
        PrefsConfig,
        "prefs",
        ctx.settings,
        db=str(ctx.work / "prefs.sqlite"),
        model=str(ctx.stage_dir("sft")),
        robot=ctx.config.robot,
        policy=ctx.config.policy,
        engine=ctx.config.engine,
    )
    return collect_pairs(config, on_pair=lambda n: ctx.progress(n / config.pairs, f"{n} pairs"))


def _reward(ctx: StageContext) -> dict:
    from training.rlhf.reward_model import train_reward

    config = _config(
        RewardConfig,
        "reward",
        ctx.settings,
        out=str(ctx.work),
        model=str(ctx.stage_dir("sft")),
        db=str(ctx.stage_dir("prefs") / "prefs.sqlite"),
    )
    return train_reward(config, lambda step, steps, loss: ctx.progress(step / steps, f"step {step}/{steps}"))


def _rl(ctx: StageContext) -> dict:
    from training.rlhf.rl import RLTrainer

    engine = ctx.config.engine
    config = _config(
        RLConfig,
        "rl",
        ctx.settings,
        out=str(ctx.work),
        model=str(ctx.stage_dir("sft")),
        reward_model=str(ctx.stage_dir("reward")),
        robot=ctx.config.robot,
        policy=ctx.config.policy,
        engine=engine,
        ray_engines=0,
    )
    ctx.progress(0.0, f"starting the {engine} engine")
    trainer = RLTrainer(config)
    try:
        return trainer.train(
            lambda s: ctx.progress(
                (s["iteration"] + 1) / config.iterations, f"iteration {s['iteration'] + 1}/{config.iterations}"
            )
        )
    finally:
        trainer.close()


def _eval(ctx: StageContext) -> dict:
    ctx.progress(0.0, "held-out set and validation split")
    result = _evaluate(
        ctx.stage_dir("rl"), ctx.stage_dir("sft"), ctx.stage_dir("reward"), ctx.config.robot, ctx.config.policy
    )
    v = result["validation"]
    if result["deployed"] == "sft":
        print(
            f"WARN rlhf gate: the RLHF model scored {v['intent_accuracy']:.1%} on the validation split ({v['n']} "
            f"lines), below the SFT model's {v['intent_accuracy_sft']:.1%}: the SFT model is deployed",
            flush=True,
        )
    return result


def _onnx(ctx: StageContext) -> dict:
    from training.rlhf.export_onnx import export_instruction_model

    deployed = ctx.results["eval"]["deployed"]
    ctx.progress(0.0, f"exporting the {deployed.upper()} model (the gate's choice) for instruction_node")
    source = ctx.stage_dir("rl" if deployed == "rlhf" else "sft")
    return {"deployed": deployed, "manifest": export_instruction_model(source, ctx.work)}


PIPELINE = Pipeline(
    "rlhf",
    (
        Stage("sft", _sft, "supervised fine-tuning", fresh_dir=True),
        Stage("prefs", _prefs, "candidate pairs rated by the simulated operator", fresh_dir=True),
        Stage("reward", _reward, "Bradley-Terry reward model", fresh_dir=True),
        Stage("rl", _rl, "GRPO", fresh_dir=True),
        Stage("eval", _eval, "RLHF and SFT models on held-out and validation lines; the gate", fresh_dir=True),
        Stage("onnx", _onnx, "the deployed model exported for the robot (ONNX Runtime)", fresh_dir=True),
    ),
)
BUDGETS = load_budgets()


def _config(cls, stage: str, overrides: dict | None, **fixed):
    """config/rlhf/<stage>.yaml with the budget's overrides (a partial `model` merges into the YAML's) and `fixed`."""
    return load_config(cls, RLHF_CONFIG_DIR / f"{stage}.yaml", **{**(overrides or {}), **fixed})


def _evaluate(model: Path, sft: Path, reward: Path, robot: str, policy: str | None = None) -> dict:
    """RLHF and SFT models on the held-out set and the phrasing set (greedy, constrained as deployed), win rates of
    RLHF over SFT, and the gate: both on RL's validation split, RLHF deployed when it scores at least SFT's accuracy
    there."""
    from training.rlhf.evaluate import evaluate, load_eval_set, operator_win_rate, reward_model_win_rate, summarize
    from training.rlhf.generation import load_generator
    from training.rlhf.limits import limits_for
    from training.rlhf.rl import VALIDATION_FILE

    items, limits = load_eval_set(HELDOUT), limits_for(robot)
    rlhf_gen, sft_gen = load_generator(str(model)), load_generator(str(sft))
    ours, base = evaluate(rlhf_gen, items, limits), evaluate(sft_gen, items, limits)
    s, b = summarize(ours), summarize(base)
    free = summarize(evaluate(rlhf_gen, items, limits, constrained=False))
    phrasings = load_eval_set(PHRASINGS)
    said, said_sft = (summarize(evaluate(g, phrasings, limits)) for g in (rlhf_gen, sft_gen))
    split = load_eval_set(model / VALIDATION_FILE)
    val, val_sft = (summarize(evaluate(g, split, limits))["intent_accuracy"] for g in (rlhf_gen, sft_gen))
    return {
        "deployed": "rlhf" if val >= val_sft else "sft",
        "validation": {
            "set": str(model / VALIDATION_FILE),
            "n": len(split),
            "intent_accuracy": val,
            "intent_accuracy_sft": val_sft,
        },
        "phrasings": {
            "set": str(PHRASINGS),
            "n": said["n"],
            "intent_accuracy": said["intent_accuracy"],
            "intent_accuracy_sft": said_sft["intent_accuracy"],
            "json_valid_rate": said["json_valid_rate"],
        },
        "set": str(HELDOUT),
        "n": s["n"],
        "intent_accuracy": s["intent_accuracy"],
        "json_valid_rate": s["json_valid_rate"],
        "intent_accuracy_sft": b["intent_accuracy"],
        "json_valid_rate_sft": b["json_valid_rate"],
        "json_valid_rate_unconstrained": free["json_valid_rate"],
        "intent_accuracy_unconstrained": free["intent_accuracy"],
        "win_rate_rm": reward_model_win_rate(ours, base, reward),
        "win_rate_operator": operator_win_rate(ours, base, robot, policy),
    }
