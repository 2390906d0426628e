"""The error taxonomy's root and the robot-side runtime's errors.

`UserFixableError` is the one type of error a person can fix (a malformed file, a wrong value, a tampered
artifact, a missing backend): the application prints its message as one line and exits 2. Each package's errors
subclass a base of its own (`EdgeError` here, `sim.errors.SimError`, `training.errors.TrainingError`,
`sim2real.errors.UserError`), and that base subclasses `UserFixableError`. Anything else is a bug and shows its
traceback. Messages name the file or value that is wrong.
"""

from __future__ import annotations


class UserFixableError(Exception):
    """Bad input a person can fix; its message is one line that says what and where."""


class EdgeError(UserFixableError):
    """An error of the robot-side runtime."""


class ArtifactError(EdgeError):
    """A policy artifact that must not be loaded: missing or malformed manifest, hash or shape mismatch,
    corrupt ONNX, or an engine that cannot be built from it."""


class ObservationError(EdgeError, ValueError):
    """An observation whose shape does not match the artifact's observation layout."""


class BackendUnavailable(EdgeError, RuntimeError):
    """The requested inference backend cannot run on this machine (library or device missing)."""


class ConfigError(EdgeError, ValueError):
    """A config file or value that the validating loader (edge.config) or a package's own check refuses (the
    training configs raise it too, as training.errors.ConfigError); the message names the file, the field and what
    is allowed."""
