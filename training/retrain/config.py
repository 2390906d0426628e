"""config/retrain/retrain.yaml -> RetrainConfig: what system identification fits per robot, how the fine-tuning's
randomisation is centred on the identified values, the promotion rule and the stage sizes of each budget."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from edge.config import check_values, load_dataclass, setting
from edge.resources import config_path
from sim.kpis import KPI_UNITS
from sim.randomization import FIELD_KEYS, NOMINAL, SIGNED_KEYS, RandomizationConfig
from training.errors import ConfigError
from training.ppo.config import PPOConfig
from training.retrain.sysid import IDENTIFIABLE, SysIdConfig

CONFIG_DIR = config_path("retrain")
DEFAULT_CONFIG = CONFIG_DIR / "retrain.yaml"
DEFAULT_SPREAD = 0.1  # relative half-width of an identified parameter's range without a centre rule


@dataclass(frozen=True)
class SysIdSizes:
    windows: int = setting(4, "replay windows of the logs for system identification", ge=1)
    window_s: float = setting(2.0, "length of each replay window (s)", gt=0)
    population: int = setting(8, "CMA-ES population", ge=2)
    generations: int = setting(10, "CMA-ES generations", ge=1)
    runs: int = setting(1, "independent CMA-ES runs evaluated together; the best wins", ge=1)
    iterations: int = setting(20, "least-squares iterations at most, polishing the search's best", ge=1)


@dataclass(frozen=True)
class Budget:
    sysid: SysIdSizes = field(default_factory=SysIdSizes)
    finetune: dict = setting({}, "PPOConfig overrides on top of the deployed run's config.yaml")
    finetune_legged: dict = setting(
        {},
        "for a robot with feet, PPOConfig overrides on top of finetune: a legged iteration costs several of a rover's",
    )
    campaign: str = setting("quick", "the standard campaign re-run (name or YAML path)")
    name: str = setting("", "the budget's name in retrain.yaml, or its file's stem")

    def __post_init__(self) -> None:
        check_values(PPOConfig, self.finetune, name="finetune", error=ConfigError)  # fails now, not after sysid
        check_values(PPOConfig, self.finetune_legged, name="finetune_legged", error=ConfigError)

    def finetune_for(self, legged: bool) -> dict:
        """The fine-tuning's PPOConfig overrides for a robot with feet (legged) or without."""
        return {**self.finetune, **self.finetune_legged} if legged else dict(self.finetune)


@dataclass(frozen=True)
class PromotionRule:
    kpis: tuple[str, ...] = setting(
        ("tracking_error_lin", "tracking_error_ang", "falls"), "KPIs compared", choices=KPI_UNITS, noun="KPI"
    )
    tolerance: float = setting(
        0.05, "identified-twin campaign: summed over the KPIs, change / gate limit the new artifact may give up", ge=0
    )
    nominal_tolerance: float = setting(
        0.25,
        "standard campaign (the nominal twin): summed over the KPIs, change / gate limit the new artifact may give up "
        "in fitting the robot as identified",
        ge=0,
    )
    per_kpi: float = setting(0.25, "any one KPI: change / gate limit", ge=0)
    min_abs: float = setting(0.01, "changes smaller than this (KPI units) do not count", ge=0)


@dataclass(frozen=True)
class SysIdEntry:
    params: tuple[str, ...] = setting(
        SysIdConfig.params,
        "twin parameters (and the sensors' encoder_offset) to identify",
        choices=IDENTIFIABLE,
        noun="identifiable parameter",
    )
    bounds: dict[str, tuple[float, float]] = setting(
        {}, "search box [low, high] per parameter", choices=IDENTIFIABLE, noun="identifiable parameter"
    )
    joint_pos_weight: float = setting(
        0.0, "weight of the joint-position error (rad^2) beside the base-velocity error ((m/s)^2)", ge=0
    )


@dataclass(frozen=True)
class CentreRule:
    relative: float | None = setting(None, "half-width as a fraction of the identified value", ge=0)
    absolute: float | None = setting(None, "half-width in the parameter's unit", ge=0)

    def __post_init__(self) -> None:
        if (self.relative is None) == (self.absolute is None):
            raise ConfigError("give one of relative or absolute spread")

    def half_width(self, value: float) -> float:
        return abs(value) * self.relative if self.relative is not None else self.absolute


@dataclass(frozen=True)
class Emphasis:
    """The fine-tuning's emphasis on what drifted: the weights of the task's reward terms that train a drifted KPI
    are multiplied by `scale` (PPOConfig.reward_scales)."""

    scale: float = setting(1.0, "factor on the weight of each reward term behind a drifted KPI; 1: none", ge=1)
    terms: dict[str, tuple[str, ...]] = setting(
        {}, "KPI -> the task reward terms that train it", choices=KPI_UNITS, noun="KPI"
    )

    def reward_scales(self, drifted: list[str]) -> dict[str, float]:
        """PPOConfig.reward_scales for the KPIs that drifted ({} when none has a term, or scale is 1)."""
        if self.scale == 1.0:
            return {}
        return {term: self.scale for kpi in drifted for term in self.terms.get(kpi, ())}


@dataclass
class RetrainConfig:
    sysid: dict[str, SysIdEntry] = setting({}, "robot name or default -> what system identification fits")
    centre: dict[str, CentreRule] = setting(
        {}, "how each identified parameter's range is centred", choices=FIELD_KEYS, noun="twin parameter"
    )
    emphasis: Emphasis = field(default_factory=Emphasis)
    promotion: PromotionRule = field(default_factory=PromotionRule)
    budgets: dict[str, Budget] = setting({}, "stage sizes by budget name")

    def __post_init__(self) -> None:
        self.budgets = {k: dataclasses.replace(b, name=k) for k, b in self.budgets.items()}

    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_CONFIG) -> RetrainConfig:
        return load_dataclass(cls, path, error=ConfigError, what="retraining config")

    def budget(self, name_or_path: str | Path) -> Budget:
        """A budget by name (minimal, quick, full) or a YAML file holding one budget's mapping."""
        path = Path(name_or_path)
        if str(name_or_path) in self.budgets:
            return self.budgets[str(name_or_path)]
        if path.suffix in (".yaml", ".yml") and path.is_file():
            budget = load_dataclass(Budget, path, error=ConfigError, what="budget file")
            return dataclasses.replace(budget, name=path.stem)
        raise ConfigError(
            f"unknown retraining budget {name_or_path!r}; choose one of "
            f"{', '.join(self.budgets)} or give a budget YAML file"
        )

    def sysid_config(self, robot: str, budget: Budget, seed: int = 0) -> SysIdConfig:
        entry = self.sysid.get(robot, self.sysid.get("default", SysIdEntry()))
        return SysIdConfig(
            params=entry.params,
            bounds=dict(entry.bounds),
            joint_pos_weight=entry.joint_pos_weight,
            population=budget.sysid.population,
            generations=budget.sysid.generations,
            runs=budget.sysid.runs,
            seed=seed,
            iterations=budget.sysid.iterations,
        )

    def centred_ranges(self, identified: dict[str, float]) -> dict[str, list[float]]:
        """Randomisation ranges centred on the identified values (PPOConfig.randomization_ranges)."""
        ranges = {}
        for name, value in identified.items():
            half = self.centre.get(name, CentreRule(relative=DEFAULT_SPREAD)).half_width(value)
            low, high = value - half, value + half
            if name not in SIGNED_KEYS:  # the others are non-negative; friction and scales must stay positive
                low = max(low, 0.0 if NOMINAL[name] == 0 else 1e-3)
            ranges[name] = [low, max(high, low)]
        return ranges

    def finetune_ranges(
        self, identified: dict[str, float], undetermined: dict[str, tuple[float, float]]
    ) -> dict[str, list[float]]:
        """The fine-tuning's randomisation: centred on each value the logs determine (`identified`), and over the
        95% interval of each they do not, widened to take in the twin as trained: the values the logs cannot
        exclude, so that the policy holds at any of them (a robot the twin cannot match leaves the parameters that
        matter undetermined, and their nominal ranges miss it), without losing what the standard campaign checks.
        A sensor's parameter (an encoder offset) is in the robot's readings, not the twin's physics: not randomised."""
        ranges = self.centred_ranges({k: v for k, v in identified.items() if k in FIELD_KEYS})
        for name, (low, high) in undetermined.items():
            if name not in FIELD_KEYS:
                continue
            ranges[name] = [min(low, NOMINAL[name]), max(high, NOMINAL[name])]
        RandomizationConfig.from_dict(ranges, "fine-tuning randomisation")  # fails here, not in a training worker
        return ranges
