"""Robot-side runtime: artifact format, inference runtimes, safety filter, validation check, and the instruction
runtime (edge.instruct). Imports only numpy, pyyaml and onnxruntime (TensorRT where present), nothing of ours.

    from edge import load_policy
    policy = load_policy("/opt/policy")          # verifies the manifest's hashes and shapes
    action = policy(observation)                   # [obs_dim] float32 -> [num_joints]
"""

from edge.errors import (
    ArtifactError,
    BackendUnavailable,
    ConfigError,
    EdgeError,
    ObservationError,
    UserFixableError,
)
from edge.manifest import Manifest, load_manifest
from edge.observation import ObservationLayout, ObsTerm
from edge.policy import Policy
from edge.runtime import BACKENDS, load_policy
from edge.safety import SafetyFilter
from edge.validation import require_validated

__all__ = [
    "ArtifactError",
    "BACKENDS",
    "BackendUnavailable",
    "ConfigError",
    "EdgeError",
    "Manifest",
    "ObsTerm",
    "ObservationError",
    "ObservationLayout",
    "Policy",
    "SafetyFilter",
    "UserFixableError",
    "load_manifest",
    "load_policy",
    "require_validated",
]
