"""The docs' budget, node parameter and config key tables, rendered from the configs, parameter structs and config
dataclasses they restate, so a config or parameter change cannot leave a doc behind.

Each table sits in its page between `<!-- table: NAME ... -->` and `<!-- end table -->`; tests/test_docs_tables.py
fails when a page's table is not what its config renders now.

    python -m tests.docs_tables --write    # rewrite the tables in docs/ from the configs
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRITE = "python -m tests.docs_tables --write"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: tuple[str, ...], rows: list[tuple]) -> str:
    return "\n".join([_row(*header), "|" + "---|" * len(header), *(_row(*r) for r in rows)])


def rlhf_budgets() -> str:
    """sim2real rlhf pipeline's budgets: config/rlhf/<stage>.yaml with config/rlhf/budgets.yaml's overrides."""
    from sim2real.rlhf import BUDGETS
    from training.rlhf.config import RLHF_CONFIG_DIR, PrefsConfig, RewardConfig, RLConfig, SFTConfig, load_config

    def stage(cls, name: str, budget):
        return load_config(cls, RLHF_CONFIG_DIR / f"{name}.yaml", **budget.settings.get(name, {}))

    rows = []
    for name, budget in BUDGETS.items():
        sft, prefs = stage(SFTConfig, "sft", budget), stage(PrefsConfig, "prefs", budget)
        reward, rl = stage(RewardConfig, "reward", budget), stage(RLConfig, "rl", budget)
        m = sft.model
        model = (
            f"scratch ({m.num_layers} layers, hidden {m.hidden_size}, MLP {m.intermediate_size})"
            if sft.base == "scratch"
            else f"{sft.base}, {sft.finetune} fine-tune"
        )
        explore = f", exploration {rl.explore_samples} below {rl.explore_below:g}" if rl.explore_samples else ""
        rows.append(
            (
                f"`{name}`",
                f"{model}: {sft.steps} steps x {sft.batch_size} over {sft.examples} demonstrations, "
                f"lr {sft.learning_rate:g}",
                f"{prefs.pairs} candidate pairs, {prefs.candidates} plans an instruction",
                f"{reward.epochs} epochs, lr {reward.learning_rate:g}, beta {reward.beta:g}, "
                f"reference {reward.reference}" + (", plans with their totals" if reward.totals else ""),
                f"{rl.iterations} iterations x {rl.prompts_per_iteration} prompts x {rl.samples_per_prompt} samples, "
                f"lr {rl.learning_rate:g}, {rl.epochs} update{'s' if rl.epochs > 1 else ''} a batch, "
                f"{rl.advantage}{explore}",
                budget.torch_threads or "every core",
            )
        )
    return _table(("budget", "SFT", "preferences", "reward model", "RL", "torch threads"), rows)


def loop_budgets() -> str:
    """sim2real loop's budgets (sim2real/loop/config.py BUDGETS)."""
    from sim2real.loop.config import BUDGETS

    def ppo(overrides: dict) -> str:
        if not overrides:
            return "config/ppo/<robot>.yaml"
        return f"<= {overrides['iterations']} iterations / {overrides['max_seconds']:g} s"

    rows = []
    for name, budget in BUDGETS.items():
        s = budget.budget().settings
        floor = s["instruction"]["accuracy_floor"]
        rows.append(
            (
                name,
                ppo(s["train"]["wheeled"]),
                ppo(s["train"]["legged"]),
                f"{s['validate']['campaign']} (legged robots: + {s['validate']['terrain_campaign']})",
                f"{s['instruction']['budget']}, held-out floor " + (f"{floor:.0%}" if floor else "none"),
                f"{s['deploy']['duty_seconds']:g} s operator script + {s['deploy']['instruction_seconds']:g} s "
                "of instructions",
                s["retrain"]["budget"],
            )
        )
    header = ("budget", "PPO, wheeled", "PPO, legged", "campaign", "RLHF", "SIL per deployment", "retraining")
    return _table(header, rows)


def loop_stage_requests() -> str:
    """What each heavy loop stage's Ray task asks a cluster for, per budget (sim2real/loop/config.py BUDGETS)."""
    from sim2real.loop.config import BUDGETS

    stages = list(next(iter(BUDGETS.values())).resources)
    rows = [(name, *(budget.resources[s].describe() for s in stages)) for name, budget in BUDGETS.items()]
    return _table(("budget", *stages), rows)


def retrain_budgets() -> str:
    """Retraining's budgets (config/retrain/retrain.yaml `budgets`)."""
    from training.retrain.config import RetrainConfig

    rows = []
    for name, b in RetrainConfig.from_yaml().budgets.items():
        s = b.sysid
        legged = f" ({b.finetune_legged['iterations']} for legged robots)" if "iterations" in b.finetune_legged else ""
        rows.append(
            (
                name,
                f"{s.windows} windows x {s.window_s:g} s; CMA-ES population {s.population} x {s.generations} "
                f"generations, {s.runs} runs",
                f"{b.finetune.get('iterations', 'the run config')} iterations{legged}, checkpoints every "
                f"{b.finetune.get('checkpoint_every', 'as the run config')}",
                b.campaign,
            )
        )
    return _table(("budget", "system id", "fine-tuning", "campaign"), rows)


def _code(value: object) -> str:
    """A parameter's value as the parameter file writes it: true/false, '' for the empty string, lists item by item."""
    if isinstance(value, tuple):
        return ", ".join(_code(v) for v in value)
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return "`''`" if value == "" else f"`{value}`"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def node_parameters(module: str, struct: str) -> Callable[[], str]:
    """A node's parameters (its struct in ros_nodes/*_params.py): name, default, the range or the choices, the
    description `ros2 param describe` shows."""

    def render() -> str:
        rows = []
        for f in fields(getattr(importlib.import_module(module), struct)):
            d, choices = f.metadata["descriptor"], f.metadata["choices"]
            ranges = [*d.integer_range, *d.floating_point_range]
            allowed = ", ".join(_code(c) for c in choices) if choices else ""
            if ranges:
                allowed = f"{_number(ranges[0].from_value)} to {_number(ranges[0].to_value)}"
            rows.append((f"`{f.name}`", _code(f.default), allowed, d.description.replace("|", "\\|")))
        return _table(("parameter", "default", "range or choices", "meaning"), rows)

    return render


def _default(value: object) -> str:
    """A config default as its YAML writes it: [low, high] for a tuple, required for none."""
    if value is MISSING:
        return "required"
    if isinstance(value, tuple):
        return f"`[{', '.join(_number(v) if isinstance(v, float) else str(v) for v in value)}]`"
    return f"`{_number(value)}`" if isinstance(value, float) else _code(value)


def config_keys(module: str, name: str) -> Callable[[], str]:
    """A config dataclass's keys (edge.config settings): key (a nested config's as section.key), default, what the
    loader allows (edge.config.allowed), meaning (the field's help)."""
    from edge.config import allowed

    def rows(cls: type, prefix: str) -> list[tuple]:
        out = []
        for f in fields(cls):
            tp, meaning = typing.get_type_hints(cls)[f.name], f.metadata.get("help", "").replace("|", "\\|")
            if isinstance(tp, type) and is_dataclass(tp):
                out.append(
                    (f"`{prefix}{f.name}`", "", f"a mapping of {', '.join(g.name for g in fields(tp))}", meaning)
                )
                out += rows(tp, f"{prefix}{f.name}.")
            else:
                out.append((f"`{prefix}{f.name}`", _default(f.default), allowed(cls, f.name), meaning))
        return out

    def render() -> str:
        return _table(
            ("key", "default", "allowed", "meaning"), rows(getattr(importlib.import_module(module), name), "")
        )

    return render


# table name -> (page, renderer)
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "rlhf-budgets": ("docs/rlhf.md", rlhf_budgets),
    "loop-budgets": ("docs/loop.md", loop_budgets),
    "loop-stage-requests": ("docs/cluster.md", loop_stage_requests),
    "retrain-budgets": ("docs/retraining.md", retrain_budgets),
    "policy_node-parameters": ("docs/ros.md", node_parameters("ros_nodes.policy_params", "PolicyParams")),
    "sim_bridge_node-parameters": ("docs/ros.md", node_parameters("ros_nodes.sim_bridge_params", "SimBridgeParams")),
    "field_recorder-parameters": (
        "docs/ros.md",
        node_parameters("ros_nodes.field_recorder_params", "FieldRecorderParams"),
    ),
    "instruction_node-parameters": (
        "docs/ros.md",
        node_parameters("ros_nodes.instruction_params", "InstructionParams"),
    ),
    "robot-yaml-keys": ("docs/twin.md", config_keys("sim.robot", "RobotConfig")),
}


def block(name: str) -> re.Pattern:
    """A table's place in its page: the opening marker, the table, the closing marker."""
    return re.compile(rf"(<!-- table: {re.escape(name)} [^\n]*-->\n)(.*?)\n?<!-- end table -->", re.S)


def in_page(name: str) -> str | None:
    """The table `name` as its page holds it now (None: the page has no such block)."""
    page, _ = TABLES[name]
    found = block(name).search((ROOT / page).read_text())
    return found.group(2) if found else None


def write(name: str) -> bool:
    """Rewrite the table in its page from its config; True when the page changed."""
    page, render = TABLES[name]
    path = ROOT / page
    text = path.read_text()
    new, count = block(name).subn(lambda m: m.group(1) + render() + "\n<!-- end table -->", text)
    if count != 1:
        raise SystemExit(f"{page}: no '<!-- table: {name} ... -->' ... '<!-- end table -->' block")
    path.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the tables in their pages")
    args = parser.parse_args(argv)
    for name, (page, render) in TABLES.items():
        if args.write:
            print(f"{page}: {name} {'rewritten' if write(name) else 'unchanged'}")
        else:
            print(f"{page}: {name}\n{render()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
