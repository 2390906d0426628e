"""The training libraries' errors: configs, checkpoints and runs a person can fix."""

from __future__ import annotations

from edge.errors import UserFixableError


class TrainingError(UserFixableError):
    """Base of the errors the training libraries raise on purpose (PPO, RLHF, retraining)."""


class ConfigError(TrainingError, ValueError):
    """A training config (YAML or flags) with a bad value; the message names the field."""


class CheckpointError(TrainingError, ValueError):
    """A checkpoint or run directory that cannot be resumed or exported."""


class TrainingDiverged(TrainingError, RuntimeError):
    """A non-finite loss or parameter: the run stops and keeps its last good checkpoint."""
