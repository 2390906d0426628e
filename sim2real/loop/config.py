"""`LoopConfig`: what `sim2real loop` runs, and how much of each stage a budget buys (`BUDGETS`: each stage's
settings and expected seconds, and what each heavy stage asks a Ray cluster for).

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
class StageResources:
    """What one stage asks a Ray cluster for when the loop runs there (`--ray-address`): the stage runs as one Ray
    task that reserves these, so Ray places it on a node that has them free."""

    cpus: float = setting(1.0, "CPUs the stage's Ray task reserves (Ray sets its torch and OpenMP threads to it)", ge=0)
    gpus: float = setting(0.0, "GPUs it reserves (Ray sets CUDA_VISIBLE_DEVICES to them)", ge=0)
    memory_gib: float = setting(2.0, "memory it reserves, GiB (Ray's logical memory resource: placement only)", ge=0)

    def __post_init__(self) -> None:
        check_values(type(self), asdict(self), name="stage resources", error=UserError)

    def ray_options(self) -> dict[str, float | int]:
        """The Ray task options that reserve these."""
        return {"num_cpus": self.cpus, "num_gpus": self.gpus, "memory": int(self.memory_gib * 1024**3)}

    def describe(self) -> str:
        return f"{self.cpus:g} CPU, {self.gpus:g} GPU, {self.memory_gib:g} GiB"


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
    resources: dict[str, StageResources] = setting(
        help="what each heavy stage asks a Ray cluster for with --ray-address (a stage named here runs as a Ray "
        "task there); the other stages run in the loop's own process"
    )

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
        # one CPU each: the test cluster's nodes have one (tests/ray_cluster.py)
        resources={
            "train": StageResources(1, 0, 2),
            "validate": StageResources(1, 0, 2),
            "instruction": StageResources(1, 0, 6),
            "retrain": StageResources(1, 0, 3),
        },
    ),
    "quick": LoopBudget(
        "quick",
        {"iterations": 150, "max_seconds": 300.0},
        legged={"iterations": 400, "max_seconds": 480.0},
        campaign="quick",
        rlhf="quick",
        accuracy_floor=0.8,
        duty_s=80.0,  # 40 s: one policy's field yaw error on the hard rover read 0.14-0.19 rad/s from run to run
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
        resources={
            "train": StageResources(2, 0, 2),
            "validate": StageResources(2, 0, 2),
            "instruction": StageResources(2, 0, 8),
            "retrain": StageResources(2, 0, 4),
        },
    ),
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
        resources={
            "train": StageResources(8, 0, 8),
            "validate": StageResources(8, 0, 8),
            "instruction": StageResources(8, 1, 32),  # RLHF's device auto: CUDA where the task sees a GPU
            "retrain": StageResources(8, 0, 8),
        },
    ),
}


def field_twin_for(robot: str) -> Path:
    """The robot's own hard field robot (config/retrain/field_robot_hard_<robot>.yaml, by name or a robot YAML's
    stem) when it has one, else the rover's config/retrain/field_robot_hard.yaml: effects its twin cannot express,
    as a real robot has. The easy field twins (field_twin*.yaml: twin parameters only) are for --field-twin."""
    own = CONFIG_DIR / "retrain" / f"field_robot_hard_{Path(robot).stem}.yaml"
    return own if own.is_file() else CONFIG_DIR / "retrain" / "field_robot_hard.yaml"


@dataclass
class LoopConfig:
    robot: str = setting("rover", "robot name or a robot YAML path")
    budget: str = setting("quick", "size of every stage", choices=BUDGETS)
    out: str = setting("", "run directory; '' makes runs/loop-<timestamp>")
    field_twin: str = setting(
        "",
        "the 'real robot' (a field robot YAML); '' picks config/retrain/field_robot_hard_<robot>.yaml, else "
        "field_robot_hard.yaml",
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
    ray_address: str = setting(
        "",
        "run each heavy stage as a Ray task on this cluster (host:port of its head, or auto); the run directory "
        "must be a path every node sees. '' runs every stage in this process",
    )

    def __post_init__(self) -> None:
        check_values(type(self), asdict(self), name="loop config", error=UserError)
        self.field_twin = self.field_twin or str(field_twin_for(self.robot))
        if not self.out:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self.out = str(Path("runs") / f"loop-{stamp}")
        if self.ray_address:  # the stages' records hold paths under out, which Ray's workers resolve elsewhere
            self.out = str(Path(self.out).resolve())

    def to_dict(self) -> dict:
        return asdict(self)
