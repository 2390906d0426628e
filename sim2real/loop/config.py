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

from edge.config import check_values, setting
from edge.instruct.onnx_generator import BACKENDS as INSTRUCTION_BACKENDS
from edge.resources import config_path
from sim2real.errors import UserError
from sim2real.pipeline import Budget
from training.rlhf.config import ENGINES

CONFIG_DIR = config_path()


@dataclass(frozen=True)
class LoopBudget:
    """A loop budget's knobs; `budget()` gives the pipeline's Budget (each stage's settings and expected seconds)."""

    name: str = setting(help="what --budget names it")
    ppo: dict = setting(
        help="PPOConfig overrides ({}: the robot's config/ppo values); max_seconds caps training, the threshold "
        "usually stops it first"
    )
    legged: dict = setting(help="the overrides for a robot with feet: a gait takes longer to learn than wheels")
    campaign: str = setting(help="the validation campaign (config/campaigns/<name>.yaml)")
    rlhf: str = setting(help="the RLHF pipeline's budget")
    accuracy_floor: float = setting(
        help="the held-out intent accuracy the deployed instruction model must reach for its stage to pass"
    )
    duty_s: float = setting(
        help="simulated seconds of the operator's driving script per deployment (the drift evidence)"
    )
    instruction_s: float = setting(help="simulated seconds of the instruction session in the first deployment")
    retrain: str = setting(help="the retraining pipeline's budget")
    expected_s: dict[str, float] = setting(help="seconds each stage takes on 2 cores, for the ETA shown before it")

    def budget(self) -> Budget:
        return Budget(
            self.name,
            {
                "train": {"wheeled": self.ppo, "legged": self.legged},  # the train stage picks by the robot
                # robots with feet are also run on the terrain campaign: reported with its own verdict, not a gate
                # of promotion (the quick budget trains on flat ground)
                "validate": {"campaign": self.campaign, "terrain_campaign": "terrain"},
                "instruction": {"budget": self.rlhf, "accuracy_floor": self.accuracy_floor},
                "deploy": {"duty_seconds": self.duty_s, "instruction_seconds": self.instruction_s},
                "retrain": {"budget": self.retrain},
                "final": {"duty_seconds": self.duty_s},
            },
            self.expected_s,
        )


BUDGETS = {
    "minimal": LoopBudget(
        "minimal",
        {"iterations": 60, "max_seconds": 150.0},
        legged={"iterations": 60, "max_seconds": 150.0},
        campaign="quick",
        rlhf="minimal",
        accuracy_floor=0.0,  # a few hundred SFT steps: the figures only show that every stage ran
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
    ).budget(),
    "quick": LoopBudget(
        "quick",
        {"iterations": 150, "max_seconds": 300.0},
        legged={"iterations": 400, "max_seconds": 480.0},
        campaign="quick",
        rlhf="quick",
        accuracy_floor=0.8,
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
    ).budget(),
    "full": LoopBudget(
        "full",
        {},
        legged={},
        campaign="full",
        rlhf="full",
        accuracy_floor=0.95,
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
    ).budget(),
}


def field_twin_for(robot: str) -> Path:
    """The robot's own field twin (config/retrain/field_twin_<robot>.yaml, by name or a robot YAML's stem) when it
    has one, else the rover's config/retrain/field_twin.yaml."""
    own = CONFIG_DIR / "retrain" / f"field_twin_{Path(robot).stem}.yaml"
    return own if own.is_file() else CONFIG_DIR / "retrain" / "field_twin.yaml"


@dataclass
class LoopConfig:
    robot: str = setting("rover", "robot name or a robot YAML path")
    budget: str = setting("quick", "size of every stage", choices=BUDGETS)
    out: str = setting("", "run directory; '' makes runs/loop-<timestamp>")
    field_twin: str = setting(
        "",
        "the 'real robot' (a field robot YAML); '' picks config/retrain/field_twin_<robot>.yaml, else field_twin.yaml",
    )
    duty: str = setting(str(CONFIG_DIR / "sil" / "default_commands.yaml"), "the operator's cmd_vel driving script")
    instructions: str = setting(str(CONFIG_DIR / "sil" / "instructions.yaml"), "script fed to instruction_node")
    # stage 1 trains on the nominal twin, so the first deployment meets a field it was not trained for and the
    # loop shows the retraining closing that gap; True trains with the task's domain randomisation
    randomize: bool = setting(False, "train stage 1 with the task's domain randomisation")
    rlhf_engine: str = setting("vllm", "what generates the RLHF samples", choices=ENGINES)
    instruction_backend: str = setting(
        "auto", "ONNX Runtime providers of instruction_node on the 'robot'", choices=INSTRUCTION_BACKENDS
    )
    seed: int = setting(0, "seed of training and the twins", ge=0)
    until: str = setting("", "stop after this stage ('' runs them all)")

    def __post_init__(self) -> None:
        check_values(type(self), asdict(self), name="loop config", error=UserError)
        self.field_twin = self.field_twin or str(field_twin_for(self.robot))
        if not self.out:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self.out = str(Path("runs") / f"loop-{stamp}")

    def to_dict(self) -> dict:
        return asdict(self)
