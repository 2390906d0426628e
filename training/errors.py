"""The training libraries' errors: configs, checkpoints and runs a person can fix.

A bad training config (YAML or flags) raises `ConfigError`: edge.errors.ConfigError (the validating loader's
default error), re-exported here rather than defined again, so that there is one class and an `except` of either
name catches it.
"""

from __future__ import annotations

from edge.errors import ConfigError, UserFixableError

__all__ = ["CheckpointError", "ConfigError", "TrainingDiverged", "TrainingError"]


class TrainingError(UserFixableError):
    """Base of the errors the training libraries raise on purpose (PPO, RLHF, retraining), configs aside."""


class CheckpointError(TrainingError, ValueError):
    """A checkpoint or run directory that cannot be resumed or exported."""


class TrainingDiverged(TrainingError, RuntimeError):
    """A non-finite loss or parameter: the run stops and keeps its last good checkpoint."""
