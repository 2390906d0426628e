"""Property targets for every input parser and boundary: each generated input must give either a clear, typed
error (a subclass of edge.errors.UserFixableError, with a message) or a safe output; never any other exception.

Shared by tests/test_fuzz_parsers.py (small case counts) and benchmarks/fuzz_soak.py (>= 10,000 per target).
A target is a hypothesis strategy plus a check; `Tally` counts what each target was fed and what escaped.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from hypothesis import strategies as st

from edge.errors import UserFixableError

ROOT = Path(__file__).resolve().parents[1]

# values that break parsers: wrong types, non-finite and huge numbers, hostile text
HOSTILE_TEXT = st.one_of(
    st.text(max_size=50),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zl", "Zp", "So"]), max_size=50),
    st.sampled_from(["", "\x00", "\u202e", "<script>", "{{7*7}}", "../../etc/passwd", "nan", "1e400", "x" * 5000]),
)
ODD_NUMBERS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e30, -1e30, 0.0, -0.0, 2**63, -(2**63) - 1]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
)
LEAF = st.one_of(st.none(), st.booleans(), ODD_NUMBERS, HOSTILE_TEXT)
ODD_VALUE = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)


@dataclass
class Tally:
    tried: int = 0
    unhandled: list[str] = field(default_factory=list)  # "ExceptionType: message" of what escaped


@dataclass
class Target:
    name: str
    strategy: st.SearchStrategy
    check: Callable[[object], None]  # raises AssertionError for an unsafe output; typed errors are fine


def _paths(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, base: dict, edits: int = 3) -> dict:
    """`base` with up to `edits` random edits: a value replaced by an odd one, a key deleted, an unknown key."""
    tree = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, edits))):
        paths = [p for p in _paths(tree) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(ODD_VALUE)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(ODD_VALUE)
    return tree


def _typed(fn: Callable[[], object]) -> object | None:
    """fn's result, or None when it raised a typed user error with a message."""
    try:
        return fn()
    except UserFixableError as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        return None


def _yaml_file(mapping: object, name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="fuzz-")) / name
    try:
        text = yaml.safe_dump(mapping, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        text = json.dumps(mapping, default=str)  # YAML is a superset of JSON
    path.write_text(text)
    return path


# -------------------------------------------------------------------------------------------------- targets
def _manifest_base() -> dict:
    from tests.campaign_helpers import export_rover_policy

    artifact = export_rover_policy(Path(tempfile.mkdtemp(prefix="fuzz-artifact-")) / "policy")
    return json.loads((artifact / "manifest.json").read_text())


def check_manifest(data: dict) -> None:
    from edge.manifest import Manifest

    manifest = _typed(lambda: Manifest.from_dict(data, source="fuzz"))
    if manifest is not None:  # accepted: what the robot then uses is well formed
        assert manifest.action_dim == len(manifest.joint_names)
        low, high = manifest.action_vector("low"), manifest.action_vector("high")
        assert np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low <= 0) and np.all(high >= 0)
        assert manifest.control_period > 0


def check_robot_yaml(data: dict) -> None:
    from sim.robot import load_robot

    path = _yaml_file(data, "robot.yaml")
    (path.parent / "rover.xml").write_bytes((ROOT / "sim" / "assets" / "rover.xml").read_bytes())
    spec = _typed(lambda: load_robot(str(path)))
    if spec is not None:
        assert len(spec.default_pose) == len(spec.joints) and spec.control_dt > 0


def check_campaign_yaml(data: dict) -> None:
    from sim.campaign.config import load_campaign

    _typed(lambda: load_campaign(_yaml_file(data, "campaign.yaml")))


def _config_loader(kind: str) -> Callable[[Path], object]:
    from training.ppo.config import PPOConfig
    from training.retrain.config import RetrainConfig
    from training.retrain.drift import TriggerPolicy
    from training.rlhf.config import PrefsConfig, RewardConfig, RLConfig, SFTConfig, load_config

    rlhf = {"sft": SFTConfig, "prefs": PrefsConfig, "reward": RewardConfig, "rl": RLConfig}
    if kind in rlhf:
        return lambda path: load_config(rlhf[kind], path)
    return {"ppo": PPOConfig.from_yaml, "retrain": RetrainConfig.from_yaml, "trigger": TriggerPolicy.from_yaml}[kind]


CONFIG_FILES = {  # the training configs the fuzzer mutates: kind -> the file it starts from
    "ppo": "ppo/rover.yaml",
    "sft": "rlhf/sft.yaml",
    "prefs": "rlhf/prefs.yaml",
    "reward": "rlhf/reward.yaml",
    "rl": "rlhf/rl.yaml",
    "retrain": "retrain/retrain.yaml",
    "trigger": "retrain/trigger.yaml",
}


@st.composite
def mutated_config(draw) -> tuple[str, dict]:
    kind = draw(st.sampled_from(sorted(CONFIG_FILES)))
    base = yaml.safe_load((ROOT / "config" / CONFIG_FILES[kind]).read_text()) or {}
    return kind, draw(mutated(base))


def check_training_config(case: tuple[str, dict]) -> None:
    kind, data = case
    _typed(lambda: _config_loader(kind)(_yaml_file(data, f"{kind}.yaml")))


def check_plan_text(text: str) -> None:
    from edge.instruct.plan import PlanError, parse_plan
    from edge.instruct.safety import PlanLimits, clamp_plan

    limits = PlanLimits()
    try:
        plan = parse_plan(text)
    except PlanError as e:
        assert str(e)
        return
    clamped, _ = clamp_plan(plan, limits)
    total = sum(s.duration_s for s in clamped)
    assert total <= limits.max_duration_s + 1e-9
    for s in clamped:
        assert limits.vx[0] <= s.vx <= limits.vx[1] and limits.wz[0] <= s.wz <= limits.wz[1]
        assert all(math.isfinite(v) for v in (s.vx, s.vy, s.wz, s.duration_s))


def check_instruction(value: object) -> None:
    from edge.instruct.safety import MAX_INSTRUCTION_CHARS, PlanLimits, screen_instruction

    clean, warnings = screen_instruction(value, PlanLimits())
    assert isinstance(clean, str) and len(clean) <= MAX_INSTRUCTION_CHARS
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in clean), repr(clean)
    assert all(isinstance(w, str) for w in warnings)


@st.composite
def damaged_mcap(draw) -> bytes:
    data = bytearray(_mcap_base())
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    for _ in range(draw(st.integers(0, 8))):
        if data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@functools.cache
def _mcap_base() -> bytes:
    from tests.field_logs import write_log

    path = Path(tempfile.mkdtemp(prefix="fuzz-mcap-")) / "log.mcap"
    write_log(path, [(1.0, 0.5, 0.0, 0.0), (1.0, 0.0, 0.0, 0.5)])
    return path.read_bytes()


def check_mcap(data: bytes) -> None:
    from tests.field_logs import JOINTS
    from training.retrain.ingest import read_field_log

    path = Path(tempfile.mkdtemp(prefix="fuzz-mcap-")) / "damaged.mcap"
    path.write_bytes(data)
    log = read_field_log(path, JOINTS)  # never raises: damage is noted, what came before is kept
    assert len(log.t) == len(log.commands) == len(log.joint_pos)
    if data != _mcap_base():
        assert log.damage or len(log.t) <= 100


@functools.cache
def _controller():
    """policy_node's control step (ros_nodes.controller) on a real rover artifact; made once, reused."""
    from edge.runtime import load_policy
    from ros_nodes.controller import PolicyController
    from tests.campaign_helpers import export_rover_policy

    artifact = export_rover_policy(Path(tempfile.mkdtemp(prefix="fuzz-policy-")) / "policy")
    return PolicyController(load_policy(artifact, "onnxruntime"), 0.04, 0.5, [0.0, 0.0, 0.0])


SENSOR_FLOATS = st.one_of(ODD_NUMBERS.filter(lambda v: isinstance(v, float)), st.floats(-10, 10))
sensor_values = st.fixed_dictionaries(
    {
        "names": st.one_of(st.just(["left_wheel_joint", "right_wheel_joint"]), st.lists(HOSTILE_TEXT, max_size=3)),
        "position": st.lists(SENSOR_FLOATS, max_size=4),
        "velocity": st.lists(SENSOR_FLOATS, max_size=4),
        "imu": st.lists(SENSOR_FLOATS, min_size=7, max_size=7),
        "odom": st.lists(SENSOR_FLOATS, min_size=3, max_size=3),
        "cmd": st.lists(SENSOR_FLOATS, min_size=3, max_size=3),
    }
)


def check_observation(v: dict) -> None:
    """Whatever the sensors say, the joint targets are finite and either the policy's (within the manifest's
    limits) or the safe pose with a named fault."""
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Imu, JointState

    control, now = _controller(), 1.0
    joints = JointState(name=v["names"], position=v["position"], velocity=v["velocity"])
    imu = Imu()
    o, w = imu.orientation, imu.angular_velocity
    o.w, o.x, o.y, o.z, w.x, w.y, w.z = v["imu"]
    odom = Odometry()
    odom.twist.twist.linear.x, odom.twist.twist.linear.y, odom.twist.twist.linear.z = v["odom"]
    cmd = Twist()
    cmd.linear.x, cmd.linear.y, cmd.angular.z = v["cmd"]
    control.inputs.joint_states(joints, now)
    control.inputs.imu(imu, now)
    control.inputs.odom(odom, now)
    control.inputs.cmd_vel(cmd, now)
    targets, fault = control.step(now)
    assert targets.shape == control.safe_targets.shape and np.all(np.isfinite(targets))
    if fault is None:
        m = control.policy.manifest
        low = control.offset + control.scale * m.action_vector("low")
        high = control.offset + control.scale * m.action_vector("high")
        assert np.all(targets >= np.minimum(low, high) - 1e-6) and np.all(targets <= np.maximum(low, high) + 1e-6)
    else:
        assert fault.reason and np.array_equal(targets, control.safe_targets)


def targets() -> list[Target]:
    robot = yaml.safe_load((ROOT / "config" / "robots" / "rover.yaml").read_text())
    campaign = yaml.safe_load((ROOT / "config" / "campaigns" / "quick.yaml").read_text())
    plan_like = st.one_of(
        HOSTILE_TEXT,
        st.builds(json.dumps, ODD_VALUE),
        st.lists(st.fixed_dictionaries({k: ODD_NUMBERS for k in ("vx", "vy", "wz", "duration_s")})).map(json.dumps),
        st.sampled_from(["[" * 10_000, '[{"vx": 1e400, "vy": 0, "wz": 0, "duration_s": 1}]']),
    )
    return [
        Target("manifest", mutated(_manifest_base()), check_manifest),
        Target("robot_yaml", mutated(robot), check_robot_yaml),
        Target("campaign_yaml", mutated(campaign), check_campaign_yaml),
        Target("training_configs", mutated_config(), check_training_config),
        Target("plan_json", plan_like, check_plan_text),
        Target(
            "instruction", st.one_of(HOSTILE_TEXT, ODD_VALUE, st.text(min_size=300, max_size=20_000)), check_instruction
        ),  # fmt: skip
        Target("mcap_bytes", damaged_mcap(), check_mcap),
        Target("observation", sensor_values, check_observation),
    ]


def tallied(check: Callable[[object], None], tally: Tally) -> Callable[[object], None]:
    """check, counting inputs and recording (instead of raising) anything that escapes, for the soak run."""

    def run(value: object) -> None:
        tally.tried += 1
        try:
            check(value)
        except Exception as e:  # noqa: BLE001 - the soak counts every escape, whatever its type
            tally.unhandled.append(f"{type(e).__name__}: {str(e)[:200]}")

    return run
