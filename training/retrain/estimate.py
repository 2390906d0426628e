"""An identified quantity with its 95% confidence interval: what system identification and sensor calibration
report for each parameter they fit."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Estimate"]


@dataclass(frozen=True)
class Estimate:
    """One identified parameter: its value, the 95% confidence interval around it, and whether the logs determine
    it (if not, `why` says so: not excited, confounded with another parameter, or too wide)."""

    value: float
    low: float
    high: float
    determined: bool
    why: str = ""

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "determined": self.determined, "why": self.why}

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        return cls(float(d["value"]), float(d["low"]), float(d["high"]), bool(d["determined"]), str(d.get("why", "")))
