"""The errors the robot-side runtime raises; each message names the file or value that is wrong."""

from __future__ import annotations


class ArtifactError(Exception):
    """A policy artifact that must not be loaded: missing or malformed manifest, hash or shape mismatch,
    corrupt ONNX, or an engine that cannot be built from it."""


class ObservationError(ValueError):
    """An observation whose shape does not match the artifact's observation layout."""


class BackendUnavailable(RuntimeError):
    """The requested inference backend cannot run on this machine (library or device missing)."""


class UserError(Exception):
    """A problem the user can act on (bad input, a run that cannot finish); the CLI prints it as one line."""
