"""The whole RLHF pipeline in one call, for `sim2real loop`: SFT -> simulated-operator preferences -> reward model ->
RL (vLLM generating) -> evaluation of the RLHF model against the SFT model on the held-out set.

    run_pipeline(Path("runs/loop/instruction"), robot="rover", budget="quick") -> dict

Resumable: each stage builds its output in `<out>/<stage>.partial/`, writes its `stage.json` there last, then
renames the directory to `<out>/<stage>/` (atomic), so a stage whose directory exists is complete and is skipped
on the next call; a leftover `.partial` directory (an interrupted run) is discarded and the stage redone.

Budgets (what a budget buys on a 2-core CPU; docs/rlhf.md has measured figures):
- `minimal`: the CI end-to-end test, about 1.5 minutes; the figures only show that every stage ran.
- `quick`: about 4 minutes; aims at the issue's targets (intent accuracy >= 90% and >= SFT + 10 points).
- `full`: config/rlhf/<stage>.yaml as they are.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from edge.fileio import atomic_write_bytes
from sim2real.errors import UserError
from training.rlhf.config import RLHF_CONFIG_DIR, PrefsConfig, RewardConfig, RLConfig, SFTConfig, load_config
from training.rlhf.model import ModelConfig

HELDOUT = RLHF_CONFIG_DIR / "heldout.jsonl"
STAGES = ("sft", "prefs", "reward", "rl", "eval")
MARKER = "stage.json"
_SMALL_MODEL = {"vocab_size": 384, "num_layers": 2, "intermediate_size": 256}
# overrides of config/rlhf/<stage>.yaml per budget; (stage share of the budget's time, for progress)
BUDGETS: dict[str, dict[str, dict]] = {
    "minimal": {
        "sft": {
            "examples": 6000,
            "steps": 400,
            "warmup_steps": 20,
            "eval_examples": 16,
            "eval_every": 0,
            "model": _SMALL_MODEL,
        },
        "prefs": {"pairs": 600},
        "reward": {"epochs": 3},
        "rl": {"iterations": 2, "prompts_per_iteration": 8},
    },
    "quick": {
        "sft": {
            "examples": 12000,
            "steps": 700,
            "warmup_steps": 30,
            "eval_examples": 32,
            "eval_every": 0,
            "model": _SMALL_MODEL,
        },
        "prefs": {"pairs": 700},
        "reward": {"epochs": 3},
        "rl": {"iterations": 24, "prompts_per_iteration": 16},
    },
    "full": {"sft": {}, "prefs": {}, "reward": {}, "rl": {}},
}
# rough share of each stage in a budget's wall time (progress reporting only)
WEIGHTS = {"sft": 0.35, "prefs": 0.1, "reward": 0.05, "rl": 0.4, "eval": 0.1}

Progress = Callable[[str, float], None]


def run_pipeline(
    out_dir: Path, robot: str = "rover", budget: str = "quick", engine: str = "vllm", progress: Progress | None = None
) -> dict:
    """Run (or resume) every stage into `out_dir`; returns a JSON-able summary:
    {model_dir, sft_dir, reward_dir, intent_accuracy, intent_accuracy_sft, json_valid_rate, win_rate_rm,
    win_rate_operator, stages: {name: seconds}} (stage seconds as measured when the stage ran)."""
    if budget not in BUDGETS:
        raise UserError(f"unknown RLHF budget {budget!r}: choose one of {', '.join(BUDGETS)}")
    if engine not in ("vllm", "transformers"):
        raise UserError(f"engine must be vllm or transformers, got {engine!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dirs = {s: out / s for s in STAGES}
    sizes = BUDGETS[budget]
    report = _Reporter(progress)

    def sft(tmp: Path) -> dict:
        from training.rlhf.sft import train_sft

        config = _config(SFTConfig, "sft", sizes, out=str(tmp), robot=robot)
        return train_sft(config, lambda step, loss: report("sft", step / config.steps, f"step {step}"))

    def prefs(tmp: Path) -> dict:
        from training.rlhf.prefs import collect_pairs

        config = _config(PrefsConfig, "prefs", sizes, db=str(tmp / "prefs.sqlite"), model=str(dirs["sft"]), robot=robot)
        return collect_pairs(config, on_pair=lambda n: report("prefs", n / config.pairs, f"{n} pairs"))

    def reward(tmp: Path) -> dict:
        from training.rlhf.reward_model import train_reward

        config = _config(
            RewardConfig, "reward", sizes, out=str(tmp), model=str(dirs["sft"]), db=str(dirs["prefs"] / "prefs.sqlite")
        )
        return train_reward(config, lambda step, loss: report("reward", min(1.0, step / 50), f"step {step}"))

    def rl(tmp: Path) -> dict:
        from training.rlhf.rl import RLTrainer

        config = _config(
            RLConfig,
            "rl",
            sizes,
            out=str(tmp),
            model=str(dirs["sft"]),
            reward_model=str(dirs["reward"]),
            robot=robot,
            engine=engine,
            ray_engines=0,
        )
        report("rl", 0.0, f"starting the {engine} engine")
        trainer = RLTrainer(config)
        try:
            return trainer.train(
                lambda s: report(
                    "rl",
                    (s["iteration"] + 1) / config.iterations,
                    f"iteration {s['iteration'] + 1}/{config.iterations}",
                )
            )
        finally:
            trainer.close()

    def evaluation(tmp: Path) -> dict:
        tmp.mkdir(parents=True, exist_ok=True)
        report("eval", 0.0, "held-out set")
        return _evaluate(dirs["rl"], dirs["sft"], dirs["reward"], robot)

    seconds = {}
    for name, build in zip(STAGES, (sft, prefs, reward, rl, evaluation), strict=True):
        seconds[name] = _stage(dirs[name], build, report, name)
    e = json.loads((dirs["eval"] / MARKER).read_text())["stats"]
    report.done()
    return {
        "model_dir": str(dirs["rl"]),
        "sft_dir": str(dirs["sft"]),
        "reward_dir": str(dirs["reward"]),
        "intent_accuracy": e["intent_accuracy"],
        "intent_accuracy_sft": e["intent_accuracy_sft"],
        "json_valid_rate": e["json_valid_rate"],
        "win_rate_rm": e["win_rate_rm"],
        "win_rate_operator": e["win_rate_operator"],
        "stages": seconds,
        "budget": budget,
        "eval": e,
    }


def _config(cls, stage: str, sizes: dict[str, dict], **fixed):
    overrides = dict(sizes[stage])
    if isinstance(overrides.get("model"), dict):  # a partial model size on top of the YAML's
        base = load_config(cls, RLHF_CONFIG_DIR / f"{stage}.yaml").model
        overrides["model"] = ModelConfig(**{**base.__dict__, **overrides["model"]})
    return load_config(cls, RLHF_CONFIG_DIR / f"{stage}.yaml", **{**overrides, **fixed})


def _stage(final: Path, build: Callable[[Path], dict], report: _Reporter, name: str) -> float:
    """Skip a complete stage; else build it in a .partial directory, mark it and rename it into place."""
    marker = final / MARKER
    if marker.is_file():
        report(name, 1.0, "done earlier")
        return float(json.loads(marker.read_text())["seconds"])
    if final.exists():  # a directory without its marker was not made by this pipeline: never overwrite it
        raise UserError(f"{final} exists but holds no {MARKER}: move it away or choose another output directory")
    tmp = final.with_name(final.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.perf_counter()
    stats = build(tmp)
    elapsed = round(time.perf_counter() - start, 1)
    tmp.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(tmp / MARKER, json.dumps({"stage": name, "seconds": elapsed, "stats": stats}, indent=2).encode())
    tmp.rename(final)
    report(name, 1.0, f"{elapsed:.0f} s")
    return elapsed


def _evaluate(model: Path, sft: Path, reward: Path, robot: str) -> dict:
    """RLHF and SFT models on the held-out set (greedy, constrained as deployed), win rates of RLHF over SFT."""
    from training.rlhf.evaluate import evaluate, load_eval_set, operator_win_rate, reward_model_win_rate, summarize
    from training.rlhf.generation import load_generator
    from training.rlhf.limits import limits_for

    items, limits = load_eval_set(HELDOUT), limits_for(robot)
    rlhf_gen, sft_gen = load_generator(str(model)), load_generator(str(sft))
    ours, base = evaluate(rlhf_gen, items, limits), evaluate(sft_gen, items, limits)
    s, b = summarize(ours), summarize(base)
    free = summarize(evaluate(rlhf_gen, items, limits, constrained=False))
    return {
        "set": str(HELDOUT),
        "n": s["n"],
        "intent_accuracy": s["intent_accuracy"],
        "json_valid_rate": s["json_valid_rate"],
        "intent_accuracy_sft": b["intent_accuracy"],
        "json_valid_rate_sft": b["json_valid_rate"],
        "json_valid_rate_unconstrained": free["json_valid_rate"],
        "intent_accuracy_unconstrained": free["intent_accuracy"],
        "win_rate_rm": reward_model_win_rate(ours, base, reward),
        "win_rate_operator": operator_win_rate(ours, base, robot),
    }


class _Reporter:
    """Turns per-stage fractions into the pipeline's overall fraction for `progress(label, fraction)`."""

    def __init__(self, progress: Progress | None):
        self.progress = progress
        self.base = {s: sum(WEIGHTS[t] for t in STAGES[:i]) for i, s in enumerate(STAGES)}

    def __call__(self, stage: str, fraction: float, info: str = "") -> None:
        if self.progress:
            overall = self.base[stage] + WEIGHTS[stage] * min(max(fraction, 0.0), 1.0)
            self.progress(f"{stage}: {info}" if info else stage, round(overall, 4))

    def done(self) -> None:
        if self.progress:
            self.progress("done", 1.0)
