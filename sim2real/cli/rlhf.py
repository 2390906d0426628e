"""`sim2real rlhf`: the language-instruction model's stages, one sub-command each (see docs/rlhf.md)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sim2real.library_logs import LOG_FILE, library_logs, quiet_libraries

PLAIN_LINE_EVERY_S = 60.0  # `rlhf pipeline` without a terminal: a line per stage and at most one a minute

HELP = "Instruction model with RLHF: SFT, preferences (page + simulated operator), reward model, RL, eval."
EXAMPLES = """the whole pipeline, resumable (SFT, preferences, reward model, RL, evaluation and the gate, export):
  sim2real rlhf pipeline --budget quick --out runs/rlhf/quick
stages, in order (defaults in config/rlhf/<stage>.yaml; outputs under runs/rlhf/):
  sim2real rlhf sft                                   # supervised fine-tuning of the SmolLM2 base (sft.yaml)
  sim2real rlhf sft --finetune lora --lora-r 16       # the same with LoRA adapters, merged on save
  sim2real rlhf sft --finetune top --top-layers 8 --no-chat-template --plan-format arrays   # cheap on a CPU
  sim2real rlhf sft --base scratch                    # the project's own small model and tokenizer
  sim2real rlhf prefs                                 # candidate pairs + simulated operator's preferences
  sim2real rlhf prefs --pairs 0 --import ratings.jsonl  # add field-log ratings
  sim2real rlhf serve --db runs/rlhf/prefs.sqlite     # preference page for people (127.0.0.1, token in URL)
  sim2real rlhf serve --db runs/rlhf/prefs.sqlite --model runs/rlhf/sft   # ... and rate plans for typed instructions
  sim2real rlhf reward                                # Bradley-Terry reward model
  sim2real rlhf rl --engine vllm                      # GRPO with vLLM generating the samples
  sim2real rlhf rl --advantage dr_grpo                # Dr. GRPO: no division by the group's std
  sim2real rlhf rl --mode async --max-staleness 1     # the engine generates the next batch during the update
  sim2real rlhf eval --model runs/rlhf/rl --set config/rlhf/heldout.jsonl \\
      --baseline runs/rlhf/sft --reward runs/rlhf/reward
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags
    from sim2real.rlhf import BUDGETS
    from training.rlhf.config import (
        ENGINES,
        INSTRUCTION_BACKENDS,
        POLICY_HELP,
        PrefsConfig,
        RewardConfig,
        RLConfig,
        SFTConfig,
    )

    sub = p.add_subparsers(dest="stage", metavar="STAGE", required=True)
    s = sub.add_parser("pipeline", help="every stage in order into one directory; a re-run resumes")
    s.add_argument("--out", default="runs/rlhf/pipeline", help="run directory (default runs/rlhf/pipeline)")
    s.add_argument(
        "--budget",
        choices=list(BUDGETS),
        default="quick",
        help="config/rlhf/budgets.yaml: minimal (CI), quick (the loop's, scratch model) or full (config/rlhf/*.yaml, "
        "SFT from the SmolLM2 base)",
    )
    s.add_argument("--robot", default="rover")
    s.add_argument("--policy", help=POLICY_HELP)
    s.add_argument("--engine", choices=ENGINES, default=RLConfig.engine, help="RL sample generator")

    stages = {
        "sft": (SFTConfig, "train the tokenizer and model on the generated corpus"),
        "prefs": (PrefsConfig, "make candidate pairs, rate them with the simulated operator, import ratings"),
        "reward": (RewardConfig, "train the Bradley-Terry reward model on the stored preferences"),
        "rl": (RLConfig, "GRPO fine-tuning; vLLM (or transformers) generates the samples"),
    }
    for stage, (cls, text) in stages.items():
        s = sub.add_parser(stage, help=text, description=f"{text}; every {cls.__name__} field is a flag.")
        s.add_argument("--config", help=f"YAML with {cls.__name__} fields (default config/rlhf/{stage}.yaml)")
        add_flags(s, cls, defaults_from=f"--config or config/rlhf/{stage}.yaml")
        if stage == "prefs":
            s.add_argument("--no-simulated", action="store_true", help="leave the new pairs for people to rate")
            s.add_argument(
                "--import", dest="ratings", metavar="JSONL", help="field-log ratings to import (docs/rlhf.md)"
            )

    s = sub.add_parser("serve", help="the preference page")
    s.add_argument("--db", default="runs/rlhf/prefs.sqlite", help="SQLite preference store")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others print a warning)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--token", help="session token (default: a fresh random one, printed in the URL)")
    s.add_argument("--rater", default="operator", help="name stored with each preference")
    s.add_argument("--model", help="model directory: the rater may type an instruction and rate two sampled plans")
    s.add_argument("--robot", default="rover", help="robot whose twin executes typed instructions' plans")
    s.add_argument("--policy", help=POLICY_HELP)

    s = sub.add_parser("eval", help="intent accuracy, JSON validity and win rates on an eval set")
    s.add_argument("--model", required=True, help="model directory to evaluate")
    s.add_argument("--set", required=True, dest="eval_set", help="JSONL of {instruction, expect}")
    s.add_argument("--baseline", help="model to compare with (e.g. the SFT model): win rates")
    s.add_argument("--reward", help="reward model for the reward-model win rate")
    s.add_argument("--robot", default="rover", help="robot whose limits clamp plans and whose twin executes them")
    s.add_argument("--backend", choices=INSTRUCTION_BACKENDS, default=INSTRUCTION_BACKENDS[0])
    s.add_argument("--unconstrained", action="store_true", help="no grammar-constrained decoding (raw validity)")
    s.add_argument("--show-failures", action="store_true", help="list the lines that fail")
    s.add_argument(
        "--samples",
        type=int,
        default=0,
        metavar="K",
        help="also sample K plans per line (temperature --temperature): pass@K, the share of lines RL's "
        "sampling can find a right plan for",
    )
    s.add_argument("--temperature", type=float, default=1.0, help="sampling temperature for --samples")


STAGE_LOG = Path("runs/rlhf") / LOG_FILE  # a stage command's library log when no --out, --model or --db names a run


def run(args: argparse.Namespace) -> int:
    quiet_libraries()  # before the stages import them: the bars and the printed figures say what happens
    stages = {
        "sft": _sft,
        "prefs": _prefs,
        "serve": _serve,
        "reward": _reward,
        "rl": _rl,
        "eval": _eval,
    }
    if args.stage == "pipeline":
        return _pipeline(args)
    named = getattr(args, "out", None) or getattr(args, "model", None) or getattr(args, "db", None)
    with library_logs(Path(named).parent / LOG_FILE if named else STAGE_LOG):  # beside the run's directories
        return stages[args.stage](args)


def _config(args: argparse.Namespace, cls: type, stage: str):
    """`cls` from --config (or config/rlhf/<stage>.yaml) with the stage's flags on top."""
    from edge.config import flag_values
    from training.rlhf.config import RLHF_CONFIG_DIR, load_config

    default = RLHF_CONFIG_DIR / f"{stage}.yaml"
    path = args.config or (default if default.is_file() else None)
    return load_config(cls, path, **flag_values(args, cls))


def _progress(total: int, label: str):
    from sim2real.cli.console import make_console, progress_bar

    progress = progress_bar("steps", "info", "remaining", console=make_console())
    return progress, progress.add_task(label, total=total, info="")


def _pipeline(args: argparse.Namespace) -> int:
    from sim2real.cli.console import make_console, progress_bar
    from sim2real.rlhf import run_pipeline

    progress = progress_bar("percent", "info", "elapsed", console=make_console())
    task = progress.add_task("RLHF", total=1.0, info="")
    plain = {"stage": "", "at": 0.0}  # without a terminal (nohup, CI) the bar shows nothing until the end

    def report(fraction: float, note: str) -> None:
        progress.update(task, completed=fraction, info=note)
        stage, now = note.split(":", 1)[0], time.monotonic()
        if not progress.console.is_terminal and (stage != plain["stage"] or now - plain["at"] >= PLAIN_LINE_EVERY_S):
            plain.update(stage=stage, at=now)
            progress.console.print(f"RLHF {fraction:4.0%} {note}", highlight=False, markup=False)

    with progress:
        result = run_pipeline(
            Path(args.out),
            robot=args.robot,
            budget=args.budget,
            engine=args.engine,
            policy=args.policy,
            progress=report,
        )
    print(json.dumps(result))
    return 0


def _sft(args: argparse.Namespace) -> int:
    from training.rlhf.config import SFTConfig
    from training.rlhf.sft import train_sft

    config = _config(args, SFTConfig, "sft")
    progress, task = _progress(config.steps, "SFT")
    with progress:
        stats = train_sft(config, lambda step, loss: progress.update(task, completed=step, info=f"loss {loss:.3f}"))
    print(json.dumps({"stage": "sft", "out": config.out, **stats}))
    return 0


def _prefs(args: argparse.Namespace) -> int:
    from training.rlhf.config import PrefsConfig
    from training.rlhf.prefs import collect_pairs
    from training.rlhf.prefs_store import PreferenceStore

    config = _config(args, PrefsConfig, "prefs")
    if args.ratings:
        added = PreferenceStore(config.db).import_field_ratings(args.ratings)
        print(f"imported {added} preferences from {args.ratings}")
    counts = PreferenceStore(config.db).counts()
    if config.pairs > 0:
        progress, task = _progress(config.pairs, "pairs")
        with progress:
            counts = collect_pairs(
                config, simulated=not args.no_simulated, on_pair=lambda n: progress.update(task, completed=n)
            )
    print(json.dumps({"stage": "prefs", "db": config.db, **counts}))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from training.rlhf.pref_page import serve

    sampler = None
    if args.model:  # typed instructions: their plans run in the robot's twin through the policy (or wheel controller)
        from training.rlhf.prefs import PairSampler

        sampler = PairSampler(args.model, args.robot, policy=args.policy)
    serve(args.db, host=args.host, port=args.port, token=args.token, rater=args.rater, sampler=sampler)
    return 0


def _reward(args: argparse.Namespace) -> int:
    from training.rlhf.config import RewardConfig
    from training.rlhf.reward_model import train_reward

    config = _config(args, RewardConfig, "reward")
    progress, task = _progress(0, "reward model")
    with progress:
        stats = train_reward(
            config,
            lambda step, steps, loss: progress.update(task, completed=step, total=steps, info=f"loss {loss:.3f}"),
        )
    print(json.dumps({"stage": "reward", "out": config.out, **stats}))
    return 0


def _rl(args: argparse.Namespace) -> int:
    from training.rlhf.config import RLConfig
    from training.rlhf.rl import RLTrainer

    config = _config(args, RLConfig, "rl")
    trainer = RLTrainer(config)
    progress, task = _progress(config.iterations, "RL")
    try:
        with progress:
            summary = trainer.train(
                lambda s: progress.update(
                    task,
                    completed=s["iteration"] + 1,
                    info=(
                        f"reward {s['reward']:.2f} sim {s['sim_score']:.2f} json {s['json_valid']:.2f} kl {s['kl']:.2f}"
                    ),
                )
            )
    finally:
        trainer.close()
    print(json.dumps({"stage": "rl", "out": config.out, **summary}))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from sim2real.rlhf import run_eval

    return run_eval(args)
