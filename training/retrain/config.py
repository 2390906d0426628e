"""config/retrain/retrain.yaml -> RetrainConfig: what system identification fits per robot, how the fine-tuning's
randomisation is centred on the identified values, the promotion rule and the stage sizes of each budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from edge.resources import config_path
from sim.randomization import FIELD_KEYS, RandomizationConfig
from training.errors import ConfigError
from training.retrain.sysid import SysIdConfig

CONFIG_DIR = config_path("retrain")
DEFAULT_CONFIG = CONFIG_DIR / "retrain.yaml"


@dataclass(frozen=True)
class Budget:
    name: str
    windows: int = 4  # replay windows of the logs for system identification
    window_s: float = 2.0
    population: int = 8  # CMA-ES
    generations: int = 10
    runs: int = 1  # independent CMA-ES runs
    finetune: dict = field(default_factory=dict)  # PPOConfig overrides
    campaign: str = "quick"  # the standard campaign re-run (name or YAML path)


@dataclass(frozen=True)
class PromotionRule:
    kpis: tuple[str, ...] = ("tracking_error_lin", "tracking_error_ang", "falls")
    tolerance: float = 0.05  # summed over the KPIs: change / gate limit
    per_kpi: float = 0.25  # any one KPI: change / gate limit
    min_abs: float = 0.01  # changes smaller than this (KPI units) do not count


@dataclass
class RetrainConfig:
    sysid: dict = field(default_factory=dict)  # robot name or "default" -> {params, bounds}
    centre: dict = field(default_factory=dict)  # parameter -> {relative: x} or {absolute: x}
    promotion: PromotionRule = field(default_factory=PromotionRule)
    budgets: dict = field(default_factory=dict)  # name -> raw budget mapping

    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_CONFIG) -> RetrainConfig:
        raw = yaml.safe_load(Path(path).read_text()) or {}
        unknown = sorted(set(raw) - {"sysid", "centre", "promotion", "budgets"})
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
        for name, rule in (raw.get("centre") or {}).items():
            if name not in FIELD_KEYS or not isinstance(rule, dict) or set(rule) - {"relative", "absolute"}:
                raise ConfigError(f"{path}: centre.{name} must be a twin parameter with relative or absolute spread")
        promotion = raw.get("promotion") or {}
        try:
            rule = PromotionRule(
                tuple(promotion.get("kpis", PromotionRule.kpis)),
                float(promotion.get("tolerance", PromotionRule.tolerance)),
                float(promotion.get("per_kpi", PromotionRule.per_kpi)),
                float(promotion.get("min_abs", PromotionRule.min_abs)),
            )
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: promotion takes kpis (a list), tolerance, per_kpi and min_abs") from None
        return cls(raw.get("sysid") or {}, raw.get("centre") or {}, rule, raw.get("budgets") or {})

    def budget(self, name_or_path: str | Path) -> Budget:
        """A budget by name (minimal, quick, full) or a YAML file holding one budget's mapping."""
        path = Path(name_or_path)
        if str(name_or_path) in self.budgets:
            raw, name = self.budgets[str(name_or_path)], str(name_or_path)
        elif path.suffix in (".yaml", ".yml") and path.is_file():
            raw, name = yaml.safe_load(path.read_text()) or {}, path.stem
        else:
            raise ConfigError(
                f"unknown retraining budget {name_or_path!r}; choose one of "
                f"{', '.join(self.budgets)} or give a budget YAML file"
            )
        unknown = sorted(set(raw) - {"sysid", "finetune", "campaign"}) + sorted(
            set(raw.get("sysid") or {}) - {"windows", "window_s", "population", "generations", "runs"}
        )
        if unknown:
            raise ConfigError(f"budget {name}: unknown key(s) {', '.join(unknown)}")
        sysid = raw.get("sysid") or {}
        try:
            return Budget(
                name,
                int(sysid.get("windows", 4)),
                float(sysid.get("window_s", 2.0)),
                int(sysid.get("population", 8)),
                int(sysid.get("generations", 10)),
                int(sysid.get("runs", 1)),
                dict(raw.get("finetune") or {}),
                str(raw.get("campaign", "quick")),
            )
        except (TypeError, ValueError):
            raise ConfigError(f"budget {name}: sysid sizes must be numbers") from None

    def sysid_config(self, robot: str, budget: Budget, seed: int = 0) -> SysIdConfig:
        entry = self.sysid.get(robot, self.sysid.get("default", {}))
        bounds = {k: tuple(v) for k, v in (entry.get("bounds") or {}).items()}
        return SysIdConfig(
            params=tuple(entry.get("params", SysIdConfig.params)),
            bounds=bounds,
            population=budget.population,
            generations=budget.generations,
            runs=budget.runs,
            seed=seed,
        )

    def centred_ranges(self, identified: dict[str, float]) -> dict[str, list[float]]:
        """Randomisation ranges centred on the identified values (PPOConfig.randomization_ranges)."""
        ranges = {}
        for name, value in identified.items():
            rule = self.centre.get(name, {"relative": 0.1})
            half = abs(value) * float(rule["relative"]) if "relative" in rule else float(rule["absolute"])
            low, high = value - half, value + half
            if name != "payload_kg":  # the others are non-negative; friction and strengths must stay positive
                low = max(low, 0.0 if name == "latency_s" else 1e-3)
            ranges[name] = [low, max(high, low)]
        RandomizationConfig.from_dict(ranges, "centred randomisation")  # fails here, not in a training worker
        return ranges
