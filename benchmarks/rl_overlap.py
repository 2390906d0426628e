"""Async RL against synchronous RL (issue 37): the same model, prompts, seed and number of updates, one vLLM engine;
wall seconds per RL iteration and validation accuracy after the last update, for both.

Synchronous (the anchor): generate, reward, update, sync weights, one after the other. Async at `--max-staleness`
(RLConfig.mode async, training.rlhf.overlap): the engine generates and the twin judges the next batch in a
background thread while the trainer updates on the current one. Seconds per iteration are the wall time of all
iterations over their number (the async pipeline's first iteration has nothing to overlap, and counts); validation
is the engine's greedy constrained plans on the validation split, as RL's checkpoint choice scores them.
Exploration is off in both runs (its extra generation depends on the samples, which differ once the weights do).
Both runs use the same torch thread count (OMP_NUM_THREADS, default 1): synchronously the second core idles while
one phase runs, which is what async uses.

    python -m benchmarks.rl_overlap --quick            # the tests' minimal model (tests/rlhf_helpers.py), ~2 min
    python -m benchmarks.rl_overlap                    # the SmolLM2 base (training.rlhf.base_model), rl.yaml settings
    python -m benchmarks.rl_overlap --model runs/rlhf/sft --reward runs/rlhf/reward --iterations 16

Last line: JSON with `speedup` (synchronous seconds per iteration / async) and `accuracy_delta` (async minus
synchronous validation accuracy, in points).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402 - the thread count must be set before torch is imported
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

BASE = "smollm2-135m-instruct"
WARM_UP_PROMPTS = 4


def _models(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path]:
    """(policy model, reward model): --quick the tests' minimal SFT and reward models; otherwise --model (default
    the SmolLM2 base) and --reward (default an untrained reward model on it: r = 0, the twin's score leads)."""
    if args.quick:
        from tests.rlhf_helpers import minimal_run

        run = minimal_run()
        return Path(run["sft_dir"]), Path(run["reward_dir"])
    from training.rlhf.base_model import resolve_base

    model_dir = Path(args.model) if args.model else resolve_base(BASE)
    if args.reward:
        return model_dir, Path(args.reward)
    from training.rlhf.model import load_model
    from training.rlhf.reward_model import save_reward_model

    model, tokenizer = load_model(model_dir)
    save_reward_model(tmp / "reward", model, model, tokenizer, {"config": {"beta": 0.1}, "stats": {}})
    return model_dir, tmp / "reward"


def _config(args: argparse.Namespace, model_dir: Path, reward_dir: Path, tmp: Path, mode: str):
    from training.rlhf.config import RLHF_CONFIG_DIR, RLConfig, load_config

    settings = {
        "model": str(model_dir),
        "reward_model": str(reward_dir),
        "out": str(tmp / mode),
        "sync_dir": str(tmp),
        "mode": mode,
        "max_staleness": args.max_staleness,
        "iterations": args.iterations,
        "explore_samples": 0,
        "validate_every": 0,  # the benchmark validates once, after the last update, outside the timed iterations
        "validation_examples": args.validation,
        "seed": args.seed,
    }
    if args.prompts:
        settings["prompts_per_iteration"] = args.prompts
    if args.quick:  # the minimal budget's RL settings (config/rlhf/budgets.yaml), on a batch of 16 prompts
        settings.update(prompts_per_iteration=args.prompts or 16, learning_rate=5e-4, epochs=2)
        return load_config(RLConfig, None, **settings)
    return load_config(RLConfig, RLHF_CONFIG_DIR / "rl.yaml", **settings)  # the base's settings


def _run(config, engine) -> dict:
    """`config.iterations` timed iterations on the shared engine, then the validation accuracy."""
    from training.rlhf.rl import RLTrainer

    trainer = RLTrainer(config, engine=engine)
    try:
        began = time.perf_counter()
        history = [trainer.step(it) for it in range(config.iterations)]
        seconds = time.perf_counter() - began
        accuracy = trainer.validate(config.iterations)
    finally:
        trainer.close()
    phases = ("generation", "reward", "training", "sync")
    return {
        "s_per_iteration": seconds / config.iterations,
        "accuracy": accuracy,
        "phases": {k: sum(h["seconds"][k] for h in history) / config.iterations for k in phases},
        "overlapped": sum(h.get("overlapped", 0.0) for h in history) / config.iterations,
        "staleness": [h.get("staleness", 0) for h in history],
        "dropped": sum(h.get("dropped", 0) for h in history),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the tests' minimal model, 6 iterations, 32 validation")
    parser.add_argument("--model", help=f"policy model directory (default: the {BASE} base)")
    parser.add_argument("--reward", help="reward model directory (default: an untrained one, r = 0)")
    parser.add_argument("--iterations", type=int, help="RL iterations (updates) per run (default 6 quick, 8)")
    parser.add_argument("--prompts", type=int, help="prompts per iteration (default 16)")
    parser.add_argument("--validation", type=int, help="validation lines (default 32 quick, 64)")
    parser.add_argument("--max-staleness", type=int, default=1, help="async runs' max_staleness (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--log",
        default=str(Path(tempfile.gettempdir()) / "rl_overlap.libraries.log"),
        help="where vLLM's, transformers' and torch's own lines go (the console keeps the figures)",
    )
    args = parser.parse_args()
    args.iterations = args.iterations or (6 if args.quick else 8)
    args.validation = args.validation or (32 if args.quick else 64)

    from sim2real.library_logs import library_logs, quiet_libraries

    quiet_libraries()  # before the libraries are imported
    import torch

    from training.rlhf.engine import shared_engine

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, library_logs(args.log):
        model_dir, reward_dir = _models(args, Path(tmp))
        engine = shared_engine(model_dir, seed=args.seed)
        # vLLM's first requests are slower: greedy (validation) and sampled (with log-probs) once each
        for temperature in (0.0, 1.0):
            engine.generate(["warm up"] * WARM_UP_PROMPTS, n=1 if temperature == 0 else 2, temperature=temperature)
        configs = {mode: _config(args, model_dir, reward_dir, Path(tmp), mode) for mode in ("sync", "async")}
        results = {mode: _run(config, engine) for mode, config in configs.items()}
    load_after = os.getloadavg()

    sync, overlapped = results["sync"], results["async"]
    speedup = sync["s_per_iteration"] / overlapped["s_per_iteration"]
    delta = 100 * (overlapped["accuracy"] - sync["accuracy"])
    config = configs["sync"]
    print(
        f"model: {model_dir}; {args.iterations} updates of {config.prompts_per_iteration} prompts x "
        f"{config.samples_per_prompt} samples; torch threads {torch.get_num_threads()}; "
        f"validation {args.validation} lines"
    )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min; {os.cpu_count()} cores)")
    columns = ("s/iter", "gen", "reward", "train", "sync", "overlap", "acc")
    print(f"{'run':22s} " + " ".join(f"{c:>7s}" for c in columns))
    for name, r in (("synchronous", sync), (f"async, staleness {args.max_staleness}", overlapped)):
        p = r["phases"]
        print(
            f"{name:22s} {r['s_per_iteration']:7.2f} {p['generation']:7.2f} {p['reward']:7.2f} {p['training']:7.2f} "
            f"{p['sync']:7.2f} {r['overlapped']:7.2f} {100 * r['accuracy']:6.1f}%"
        )
    print(
        f"async: staleness per iteration {overlapped['staleness']}, samples dropped {overlapped['dropped']}; "
        f"speedup {speedup:.2f}x, accuracy {delta:+.1f} points"
    )
    print(f"the libraries' own lines: {args.log}")
    print(
        json.dumps(
            {
                "bench": "rl_overlap",
                "baseline": "synchronous RL, same prompts, seed and updates",
                "speedup": round(speedup, 2),
                "accuracy_delta": round(delta, 1),
                "sync_s_per_iteration": round(sync["s_per_iteration"], 2),
                "async_s_per_iteration": round(overlapped["s_per_iteration"], 2),
                "sync_accuracy": sync["accuracy"],
                "async_accuracy": overlapped["accuracy"],
                "max_staleness": args.max_staleness,
                "iterations": args.iterations,
                "threads": torch.get_num_threads(),
                "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
                "model": str(model_dir),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
