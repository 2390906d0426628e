"""The artifact manifest (`manifest.json`): the single source of every number the campaign, the sim bridge and
the ROS nodes need to run a policy, so nothing is copied by hand between training, validation and deployment.

Action convention (the twin's, see sim.twin): the policy outputs `actions`; the actuator target is
`offset + scale * action`, with offset = default pose for position control and zero otherwise. The limits
`action.low/high` are in action units (what the safety filter clamps); `action.target_low/high` are the same
limits in target units (rad, rad/s or N m by control mode).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from edge.config import setting
from edge.errors import ArtifactError
from edge.fileio import atomic_write_bytes, sha256_file
from edge.observation import ObsTerm

SCHEMA_VERSION = 1
# what the robot does on a fault or an e-stop: hold the default pose at full PD gains, or damp (kp = 0, the
# manifest's kd: a moving legged robot sinks instead of snapping into its stance)
SAFE_MODES = ("hold", "damp")
MANIFEST_FILE = "manifest.json"
ONNX_FILE = "policy.onnx"
SIGNATURE_FILE = "signature"  # ed25519 over manifest.json (edge.signing), once promoted
INPUT_NAME = "obs"
OUTPUT_NAME = "actions"

# top-level field -> keys it must hold (None: a plain value); the loader names every missing one
_REQUIRED: dict[str, tuple[str, ...] | None] = {
    "schema_version": None,
    "robot": ("name", "asset", "asset_sha256"),
    "joint_names": None,
    "observation": ("dim", "terms"),
    "action": ("dim", "scale", "offset", "low", "high", "target_low", "target_high", "rate_limit"),
    "control": ("mode", "period_s", "sim_dt", "decimation", "kp", "kd", "torque_limit"),
    "command_limits": ("vx", "vy", "wz"),
    "policy": ("file", "sha256", "input", "output", "opset"),
    "training_run_id": None,
    "campaign_verdict": None,
}
_TERM_KEYS = ("name", "size", "scale", "ros_source")
_PER_JOINT = (
    ("action", ("scale", "offset", "low", "high", "target_low", "target_high")),
    ("control", ("kp", "kd", "torque_limit")),
)


@dataclass(frozen=True)
class Manifest:
    schema_version: int
    robot: dict
    joint_names: list[str]
    observation: dict
    action: dict
    control: dict
    command_limits: dict
    policy: dict
    training_run_id: str
    campaign_verdict: dict | None = None

    @property
    def obs_dim(self) -> int:
        return int(self.observation["dim"])

    @property
    def action_dim(self) -> int:
        return int(self.action["dim"])

    @property
    def control_period(self) -> float:
        return float(self.control["period_s"])

    @property
    def safe_mode(self) -> str:
        """hold or damp (SAFE_MODES); manifests written before safe modes hold."""
        return self.control.get("safe_mode", "hold")

    def action_vector(self, key: str) -> np.ndarray:
        """One per-joint action field (scale, offset, low, high, target_low, target_high) as float32."""
        return np.asarray(self.action[key], dtype=np.float32)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def with_verdict(self, verdict: Mapping | None) -> Manifest:
        return dataclasses.replace(self, campaign_verdict=None if verdict is None else dict(verdict))

    @classmethod
    def from_dict(cls, data: object, source: str = MANIFEST_FILE) -> Manifest:
        """Validate a parsed manifest; any problem raises ArtifactError naming the field."""
        if not isinstance(data, dict):
            raise ArtifactError(f"{source}: expected a JSON object at the top level")
        if "schema_version" in data and data["schema_version"] != SCHEMA_VERSION:
            raise ArtifactError(
                f"{source}: schema version {data['schema_version']!r}, this runtime reads version {SCHEMA_VERSION}; "
                "re-export the policy with this version of edge"
            )
        missing = [k for k in _REQUIRED if k not in data]
        for key, subkeys in _REQUIRED.items():
            if subkeys and isinstance(data.get(key), dict):
                missing += [f"{key}.{s}" for s in subkeys if s not in data[key]]
            elif subkeys and key in data:
                raise ArtifactError(f"{source}: field {key} must be an object")
        if missing:
            raise ArtifactError(f"{source}: missing field(s) {', '.join(missing)}")
        manifest = cls(**{k: data[k] for k in _REQUIRED})
        try:
            manifest._check_consistency()
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"{source}: {e}") from None
        return manifest

    def _check_consistency(self) -> None:
        n = len(self.joint_names)
        if n == 0 or self.action_dim != n:
            raise ValueError(f"action.dim {self.action_dim} does not match {n} joint_names")
        for section, keys in _PER_JOINT:
            for key in keys:
                values = np.asarray(getattr(self, section)[key], dtype=np.float64)
                if values.shape != (n,) or not np.all(np.isfinite(values)):
                    raise ValueError(f"{section}.{key} must hold {n} finite numbers (one per joint)")
        low, high = self.action_vector("low"), self.action_vector("high")
        if np.any(low > 0) or np.any(high < 0):
            raise ValueError("action.low/high must contain the zero action (the safe action)")
        for term in self.observation["terms"]:
            if not isinstance(term, dict) or any(k not in term for k in _TERM_KEYS):
                raise ValueError(f"each observation term needs {', '.join(_TERM_KEYS)}; got {term!r}")
            if len(term["scale"]) != term["size"]:
                raise ValueError(f"observation term {term['name']}: {len(term['scale'])} scales, size {term['size']}")
        total = sum(int(t["size"]) for t in self.observation["terms"])
        if total != self.obs_dim:
            raise ValueError(f"observation.dim {self.obs_dim} is not the sum of its term sizes ({total})")
        if self.action["rate_limit"] is not None and float(self.action["rate_limit"]) <= 0:
            raise ValueError("action.rate_limit must be positive or null")
        if float(self.control["period_s"]) <= 0:
            raise ValueError("control.period_s must be positive")
        if self.safe_mode not in SAFE_MODES:
            raise ValueError(f"control.safe_mode {self.safe_mode!r} is not one of {', '.join(SAFE_MODES)}")


def _per_joint(value, n: int, key: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:  # the robot YAML gives one gain or scale for all joints
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{key} needs one value per joint ({n}), got {arr.size}")
    return arr


def action_limits(
    robot: Mapping,
    target_limits: tuple[ArrayLike, ArrayLike] | None,
    clip_actions: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-joint action limits (action units) from target limits (target units; +-inf for an unlimited joint) and
    the action clip the policy was trained with. A torque robot without target limits uses +-torque_limit."""
    n = len(robot["joints"])
    scale = _per_joint(robot["action_scale"], n, "action_scale")
    if np.any(scale <= 0):
        raise ValueError("action_scale must be positive")
    offset = _action_offset(robot)
    if target_limits is None and robot["control_mode"] == "torque":
        limit = _per_joint(robot["torque_limit"], n, "torque_limit")
        target_limits = (-limit, limit)
    low, high = np.full(n, -np.inf), np.full(n, np.inf)
    if target_limits is not None:
        low = (_per_joint(target_limits[0], n, "target_limits low") - offset) / scale
        high = (_per_joint(target_limits[1], n, "target_limits high") - offset) / scale
    if clip_actions is not None:
        low, high = np.maximum(low, -clip_actions), np.minimum(high, clip_actions)
    joints = robot["joints"]
    unbounded = [j for j, lo, hi in zip(joints, low, high, strict=True) if not (np.isfinite(lo) and np.isfinite(hi))]
    if unbounded:
        raise ValueError(f"no action limit for joint(s) {', '.join(unbounded)}: pass target_limits or clip_actions")
    outside = [j for j, lo, hi in zip(joints, low, high, strict=True) if lo > 0 or hi < 0]
    if outside:
        raise ValueError(f"the zero action (default pose) of joint(s) {', '.join(outside)} lies outside its limits")
    return low, high


def _rounded(values: np.ndarray) -> list[float]:
    # 10 significant digits: far below float32 resolution, and -0.686 stays -0.686 rather than -0.6860000000000002
    return [float(f"{v:.10g}") for v in values]


def _action_offset(robot: Mapping) -> np.ndarray:
    n = len(robot["joints"])
    # the twin adds the default pose only to position targets (sim.twin._targets); velocity/torque start at zero
    return _per_joint(robot["default_pose"], n, "default_pose") if robot["control_mode"] == "position" else np.zeros(n)


@dataclass(frozen=True)
class ActionLimits:
    """What bounds an exported policy's actions (the manifest's action limits and the safety filter's rate)."""

    target_limits: tuple[Sequence[float], Sequence[float]] | None = setting(
        None,
        "(low, high) per joint in target units (rad for position control, rad/s for velocity, N m for torque; "
        "+-inf where a joint is unlimited), e.g. the MJCF joint ranges of a position-controlled robot",
    )
    clip_actions: float | None = setting(
        None,
        "the action clip the policy was trained with (the twin's clip_actions), in action units; the manifest's "
        "action limits are the tighter of the two, and at least one must bound every joint",
    )
    rate_limit: float | None = setting(
        None, "largest action change per second (action units) the safety filter allows; None: no limit"
    )

    def per_joint(self, robot: Mapping) -> tuple[np.ndarray, np.ndarray]:
        """The (low, high) action limits of each joint (action_limits)."""
        return action_limits(robot, self.target_limits, self.clip_actions)


def build_manifest(
    robot: Mapping,
    obs_terms: Sequence[ObsTerm],
    *,
    onnx_sha256: str,
    run_id: str,
    opset: int,
    limits: ActionLimits = ActionLimits(),
) -> Manifest:
    """The manifest for a policy exported from a robot dict (sim.robot.RobotSpec.to_dict())."""
    n = len(robot["joints"])
    scale = _per_joint(robot["action_scale"], n, "action_scale")
    offset = _action_offset(robot)
    low, high = limits.per_joint(robot)
    mjcf = Path(robot["mjcf"])
    data = {
        "schema_version": SCHEMA_VERSION,
        "robot": {"name": str(robot["name"]), "asset": mjcf.name, "asset_sha256": sha256_file(mjcf)},
        "joint_names": [str(j) for j in robot["joints"]],
        "observation": {
            "dim": sum(t.size for t in obs_terms),
            "terms": [
                {"name": t.name, "size": t.size, "scale": list(t.scale), "ros_source": t.ros_source} for t in obs_terms
            ],
        },
        "action": {
            "dim": n,
            "scale": scale.tolist(),
            "offset": offset.tolist(),
            "low": _rounded(low),
            "high": _rounded(high),
            "target_low": _rounded(offset + scale * low),
            "target_high": _rounded(offset + scale * high),
            "rate_limit": None if limits.rate_limit is None else float(limits.rate_limit),
        },
        "control": {
            "mode": str(robot["control_mode"]),
            "period_s": float(robot["sim_dt"]) * int(robot["decimation"]),
            "sim_dt": float(robot["sim_dt"]),
            "decimation": int(robot["decimation"]),
            "kp": _per_joint(robot["kp"], n, "kp").tolist(),
            "kd": _per_joint(robot["kd"], n, "kd").tolist(),
            "torque_limit": _per_joint(robot["torque_limit"], n, "torque_limit").tolist(),
            "safe_mode": str(robot.get("safe_mode", "hold")),
        },
        "command_limits": {k: [float(v) for v in robot["command_limits"][k]] for k in ("vx", "vy", "wz")},
        "policy": {
            "file": ONNX_FILE,
            "sha256": onnx_sha256,
            "input": INPUT_NAME,
            "output": OUTPUT_NAME,
            "opset": int(opset),
        },
        "training_run_id": str(run_id),
        "campaign_verdict": None,
    }
    return Manifest.from_dict(data, source="exported manifest")


def load_manifest(artifact_dir: str | Path) -> Manifest:
    path = Path(artifact_dir) / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError(f"{path}: no manifest here; is {artifact_dir} a policy artifact directory?")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: not valid JSON ({e})") from None
    return Manifest.from_dict(data, source=str(path))


def write_manifest(artifact_dir: str | Path, manifest: Manifest) -> Path:
    path = Path(artifact_dir) / MANIFEST_FILE
    atomic_write_bytes(path, (_to_json(manifest.to_dict()) + "\n").encode())
    return path


def _to_json(value, indent: str = "") -> str:
    """JSON with one line per field and each list of numbers or strings on one line, for people reading it.
    allow_nan=False: a NaN limit must fail here, not become invalid JSON on the robot."""
    if isinstance(value, dict) and value:
        inner = indent + "  "
        fields = [f"{inner}{json.dumps(k)}: {_to_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(fields) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + _to_json(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value, allow_nan=False)


def record_verdict(artifact_dir: str | Path, verdict: Mapping | None) -> Manifest:
    """Store a validation campaign's verdict in the artifact's manifest (None clears it)."""
    manifest = load_manifest(artifact_dir).with_verdict(verdict)
    write_manifest(artifact_dir, manifest)
    # a signature over the manifest as it was no longer holds: gone, so nobody mistakes it for a stale promotion
    (Path(artifact_dir) / SIGNATURE_FILE).unlink(missing_ok=True)
    return manifest
