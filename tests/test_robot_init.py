"""`sim2real robot init`: a robot YAML from the robot's own MJCF (actuators, keyframe, feet, base), with and
without a floor, with and without a keyframe, with mesh assets; the one-line errors; the command line."""

import os
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from sim.floor import FLOOR_NAME
from sim.randomization import RandomizationConfig
from sim.robot import RobotConfigError, build_model, load_robot
from sim.robot_init import init_robot
from sim.twin import BatchedTwin

ROOT = Path(__file__).resolve().parents[1]

# A small dog: bodies defined FL, FR, RL, RR; actuators listed FR, FL, RR, RL (action order is actuator order).
# Robot geoms have contype 2 and conaffinity 0: a floor with the default bits (1, 1) would not touch them.
DOG = """
<mujoco model="dog">
  <compiler angle="radian" autolimits="true" @COMPILER@/>
  <option timestep="0.004"/>
  @ASSET@
  <default>
    <geom contype="2" conaffinity="0" friction="1 0.005 0.0001"/>
    <joint damping="0.3" armature="0.01"/>
    <default class="hip">
      <joint axis="0 1 0" range="-1 1.5"/><position kp="30" forcerange="-12 12" @KV_HIP@/>
    </default>
    <default class="knee">
      <joint axis="0 1 0" range="-2.5 -0.3"/><position kp="40" forcerange="-18 18" @KV_KNEE@/>
    </default>
  </default>
  <worldbody>
    @FLOOR@
    <body name="torso" pos="0 0 0.3">
      <freejoint/>
      @TRUNK@
      <site name="imu"/>
      @LEGS@
    </body>
  </worldbody>
  <actuator>@ACTUATORS@</actuator>
  @KEYFRAME@
</mujoco>
"""
LEG = """
      <body name="@N@_thigh" pos="@X@ @Y@ 0">
        <joint name="@N@_hip" class="hip"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.12" size="0.015" mass="0.3"/>
        <body name="@N@_calf" pos="0 0 -0.12">
          <joint name="@N@_knee" class="knee"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.12" size="0.012" mass="0.1"/>
          <geom name="@N@_foot" type="sphere" pos="0 0 -0.12" size="0.02" mass="0.03"/>
        </body>
      </body>"""
LEGS = {"fl": (0.15, 0.08), "fr": (0.15, -0.08), "rl": (-0.15, 0.08), "rr": (-0.15, -0.08)}
ACTUATOR_ORDER = ("fr", "fl", "rr", "rl")
# the home pose per leg (hip, knee), written into the keyframe in body (qpos) order
HOME = {"fl": (0.5, -1.0), "fr": (0.6, -1.1), "rl": (0.7, -1.2), "rr": (0.8, -1.3)}
HOME_Z = 0.21
BOX = "<geom type='box' size='0.2 0.1 0.04' mass='4'/>"


def dog_xml(
    floor=False, keyframe=True, kv=True, actuators=True, mesh=False, free=True, extra_actuator="", foot="foot"
) -> str:
    qpos = [0, 0, HOME_Z, 1, 0, 0, 0] + [v for n in LEGS for v in HOME[n]]
    acts = "".join(
        f'<position name="{n}_{j}_act" joint="{n}_{j}" class="{c}"/>'
        for n in ACTUATOR_ORDER
        for j, c in (("hip", "hip"), ("knee", "knee"))
    )
    parts = {
        "@COMPILER@": 'meshdir="meshes"' if mesh else "",
        "@ASSET@": '<asset><mesh name="trunk" file="box.obj"/></asset>' if mesh else "",
        "@KV_HIP@": 'kv="0.8"' if kv else "",
        "@KV_KNEE@": 'kv="1.1"' if kv else "",
        "@FLOOR@": '<geom name="ground" type="plane" size="0 0 1" contype="1" conaffinity="2"/>' if floor else "",
        "@TRUNK@": "<geom type='mesh' mesh='trunk' mass='4'/>" if mesh else BOX,
        "@LEGS@": "".join(
            LEG.replace("@N@", n).replace("@X@", str(x)).replace("@Y@", str(y)) for n, (x, y) in LEGS.items()
        ),
        "@ACTUATORS@": (acts if actuators else "") + extra_actuator,
        "@KEYFRAME@": f'<keyframe><key name="home" qpos="{" ".join(map(str, qpos))}"/></keyframe>' if keyframe else "",
    }
    xml = DOG
    for k, v in parts.items():
        xml = xml.replace(k, v)
    xml = xml.replace('_foot" type="sphere"', f'_{foot}" type="sphere"')
    return xml if free else xml.replace("<freejoint/>", "")


def write_dog(directory: Path, **kw) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "dog.xml"
    path.write_text(dog_xml(**kw))
    return path


def box_obj(half=(0.2, 0.1, 0.04)) -> str:
    """A Wavefront OBJ of a box centred on the origin (8 vertices, 6 outward-facing quads)."""
    hx, hy, hz = half
    verts = [f"v {sx * hx} {sy * hy} {sz * hz}" for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    quads = [(1, 2, 4, 3), (5, 7, 8, 6), (1, 5, 6, 2), (3, 4, 8, 7), (1, 3, 7, 5), (2, 6, 8, 4)]
    return "\n".join(verts + [f"f {a} {b} {c} {d}" for a, b, c, d in quads]) + "\n"


def stand(robot_yaml: Path, steps: int = 50) -> np.ndarray:
    """Base heights of 2 nominal envs holding the default pose for `steps` control steps."""
    twin = BatchedTwin(robot_yaml, num_envs=2, seed=0, randomization=RandomizationConfig(enabled=False), nthread=1)
    twin.reset()
    heights = []
    for _ in range(steps):
        _, _, terminated, _, _ = twin.step(np.zeros((2, twin.spec.num_actions)))
        assert not terminated.any()
        heights.append(twin.backend.state()["base_pos"][:, 2])
    twin.close()
    return np.array(heights)


def test_init_reads_the_mjcf_numbers_and_the_robot_stands_on_an_added_floor(tmp_path):
    xml = write_dog(tmp_path)
    out, draft = init_robot(xml)
    assert out == tmp_path / "dog.yaml"
    raw = yaml.safe_load(out.read_text())
    joints = [f"{n}_{j}" for n in ACTUATOR_ORDER for j in ("hip", "knee")]
    assert raw["joints"] == joints and raw["base_body"] == "torso" and raw["mjcf"] == "dog.xml"
    assert raw["kp"] == [30.0, 40.0] * 4 and raw["kd"] == [0.8, 1.1] * 4  # the actuators' kp and kv
    assert raw["torque_limit"] == [12.0, 18.0] * 4
    assert raw["default_pose"] == [v for n in ACTUATOR_ORDER for v in HOME[n]]
    assert raw["base_height"] == HOME_Z and raw["feet"] == [f"{n}_foot" for n in LEGS]
    assert raw["control_mode"] == "position" and raw["sim_dt"] == 0.004 and raw["decimation"] == 5
    assert any("no ground" in line for line in draft.notes)
    assert "# N m/rad, from the position actuators' kp" in out.read_text()

    spec = load_robot(out)
    model = build_model(spec)
    assert model.geom(FLOOR_NAME).id >= 0
    np.testing.assert_array_equal(model.actuator_gainprm[:, 0], spec.joint_kp)  # per-joint gains reach MuJoCo
    np.testing.assert_array_equal(-model.actuator_biasprm[:, 2], spec.joint_kd)
    heights = stand(out)
    assert heights.min() > 0.15, heights.min()  # on the added floor: it neither falls through nor sinks


def test_init_with_the_models_own_floor_adds_none(tmp_path):
    out, draft = init_robot(write_dog(tmp_path, floor=True))
    assert not any("no ground" in line for line in draft.notes)
    model = build_model(load_robot(out))
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, FLOOR_NAME) == -1
    assert stand(out, steps=25).min() > 0.15


def test_without_a_keyframe_the_pose_is_clipped_zero_and_the_height_from_the_geometry(tmp_path):
    out, draft = init_robot(write_dog(tmp_path, keyframe=False))
    raw = yaml.safe_load(out.read_text())
    assert raw["default_pose"] == [0.0, -0.3] * 4  # the knee's zero clipped into [-2.5, -0.3]
    foot_bottom = 0.12 + 0.12 * np.cos(0.3) + 0.02  # below the hip, which is at the base origin
    assert raw["base_height"] == pytest.approx(foot_bottom + 0.005, abs=1e-4)
    assert any(line.startswith("guessed: no keyframe") for line in draft.notes)
    assert any(line.startswith("guessed: base_height") for line in draft.notes)
    assert stand(out, steps=25).min() > 0.15


def test_kd_from_joint_damping_when_the_actuators_have_no_kv(tmp_path):
    out, draft = init_robot(write_dog(tmp_path, kv=False))
    assert yaml.safe_load(out.read_text())["kd"] == 0.3
    assert any("joint damping" in line for line in draft.notes)


def test_feet_without_foot_names_are_each_legs_lowest_geom(tmp_path):
    out, draft = init_robot(write_dog(tmp_path, foot="pad"))
    assert yaml.safe_load(out.read_text())["feet"] == [f"{n}_pad" for n in LEGS]
    assert any(line.startswith("guessed: feet fl_pad") for line in draft.notes)


def test_mesh_assets_load_from_the_mjcfs_own_directory(tmp_path):
    robot_dir = tmp_path / "robot"
    (robot_dir / "meshes").mkdir(parents=True)
    (robot_dir / "meshes" / "box.obj").write_text(box_obj())
    out, _ = init_robot(write_dog(robot_dir, mesh=True), tmp_path / "configs" / "dog.yaml")
    assert yaml.safe_load(out.read_text())["mjcf"] == "../robot/dog.xml"
    assert stand(out, steps=25).min() > 0.15


def test_an_mjcf_without_actuators_takes_the_gains_from_flags(tmp_path):
    xml = write_dog(tmp_path, actuators=False)
    with pytest.raises(RobotConfigError, match="has no actuators: give --kp and --kd"):
        init_robot(xml)
    with pytest.raises(RobotConfigError, match="has no force range: give --torque-limit"):
        init_robot(xml, kp=30, kd=1)
    out, draft = init_robot(xml, kp=30, kd=1, torque_limit=15)
    raw = yaml.safe_load(out.read_text())
    assert (raw["kp"], raw["kd"], raw["torque_limit"]) == (30.0, 1.0, 15.0)
    assert raw["joints"] == [f"{n}_{j}" for n in LEGS for j in ("hip", "knee")]  # MJCF joint order
    assert any(line.startswith("guessed: no actuators") for line in draft.notes)


def test_gymnasiums_ant_with_geared_motors_comes_in_with_its_motor_torques(tmp_path):
    """The robot benchmarks/twin_throughput.py sets beside EnvPool: motors (gear 150, ctrl in [-1, 1]) carry no PD
    gains, so kp and kd are flags, and a motor's torque limit is its control range times its gear."""
    import gymnasium

    ant = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "ant.xml"
    with pytest.raises(RobotConfigError, match="motor .torque. actuators, which carry no PD gains"):
        init_robot(ant, tmp_path / "ant.yaml")
    out, _ = init_robot(ant, tmp_path / "ant.yaml", kp=50, kd=1)
    spec = load_robot(out)
    assert spec.torque_limit == (150.0,) * 8 and spec.base_body == "torso" and len(spec.feet) == 4
    assert spec.joints[:2] == ("hip_4", "ankle_4")  # actuator order


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"free": False, "keyframe": False}, "no free joint"),
        ({"extra_actuator": '<motor name="thrust" site="imu" gear="0 0 1 0 0 0"/>'}, "actuator thrust drives no joint"),
    ],
)
def test_what_cannot_be_inferred_is_one_line(tmp_path, kw, message):
    with pytest.raises(RobotConfigError, match=message) as e:
        init_robot(write_dog(tmp_path, **kw))
    assert "\n" not in str(e.value)
    assert not (tmp_path / "dog.yaml").exists()


def test_bad_files_and_an_existing_output_are_one_line(tmp_path):
    with pytest.raises(RobotConfigError, match="no such MJCF file"):
        init_robot(tmp_path / "missing.xml")
    (tmp_path / "bad.xml").write_text("<mujoco><worldbody>")
    with pytest.raises(RobotConfigError, match="bad.xml: malformed MJCF: XML parse error") as e:
        init_robot(tmp_path / "bad.xml")
    assert "\n" not in str(e.value)
    xml = write_dog(tmp_path)
    init_robot(xml)
    with pytest.raises(RobotConfigError, match="dog.yaml exists: pass --force"):
        init_robot(xml)
    init_robot(xml, force=True)


def test_the_projects_quadruped_mjcf_gives_its_hand_written_names(tmp_path):
    """sim/assets/quadruped.xml has no actuators and no keyframe: the names match the hand-written YAML, the
    numbers are the flags' and the geometry's (docs/twin.md lists the differences)."""
    out, _ = init_robot(ROOT / "sim/assets/quadruped.xml", tmp_path / "q.yaml", kp=40, kd=1, torque_limit=23.7)
    ours = yaml.safe_load(out.read_text())
    hand = yaml.safe_load((ROOT / "config/robots/quadruped.yaml").read_text())
    same = ("name", "base_body", "joints", "feet", "control_mode", "safe_mode", "sim_dt", "decimation", "kp", "kd")
    for key in (*same, "action_scale", "command_limits"):
        assert ours[key] == hand[key], key
    assert load_robot(out).mjcf == load_robot("quadruped").mjcf


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim2real", "robot", "init", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def test_cli_prints_its_guesses_and_exits_2_with_one_line_on_a_bad_file(tmp_path):
    write_dog(tmp_path, keyframe=False)
    ok = run_cli("dog.xml", "-o", "dog.yaml", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("wrote dog.yaml: dog, 8 joints (position), base torso")
    assert "  guessed: no keyframe" in ok.stdout and "  check: command_limits" in ok.stdout
    (tmp_path / "bad.xml").write_text("<mujoco><worldbody>")
    bad = run_cli("bad.xml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("sim2real robot: error: bad.xml: malformed MJCF")


def test_a_legged_robot_is_proposed_the_fast_physics_and_told_so(tmp_path):
    out, draft = init_robot(write_dog(tmp_path))
    raw = yaml.safe_load(out.read_text())
    assert raw["physics"] == {
        "contacts": "feet_and_base",
        "solver": "pgs",
        "iterations": 10,
        "cone": "pyramidal",
        "integrator": "implicitfast",
    }
    assert any(line.startswith("check: physics: the fast set") for line in draft.notes)
    assert load_robot(out).physics.solver == "pgs"


def test_a_legged_robot_with_a_short_timestep_trains_at_4_ms_and_campaigns_step_its_own(tmp_path):
    """Under 4 ms the fast set also proposes 4 ms substeps: the twin steps 5 of them per 20 ms policy step, and the
    MJCF's own physics (what campaigns judge) steps the YAML's 2 ms 10 times, over the same policy period."""
    xml = write_dog(tmp_path)
    xml.write_text(xml.read_text().replace('timestep="0.004"', 'timestep="0.002"'))
    out, draft = init_robot(xml)
    raw = yaml.safe_load(out.read_text())
    assert (raw["sim_dt"], raw["decimation"], raw["physics"]["substeps"]) == (0.002, 10, 5)
    assert any("4 ms steps" in line for line in draft.notes if line.startswith("check: physics"))
    fast = load_robot(out)
    own = fast.with_mjcf_physics()
    assert (fast.physics_dt, fast.physics_steps) == (pytest.approx(0.004), 5)
    assert (own.physics_dt, own.physics_steps) == (0.002, 10)
    assert fast.control_dt == own.control_dt == pytest.approx(0.02)
    for spec, dt in ((fast, 0.004), (own, 0.002)):
        twin = BatchedTwin(spec, num_envs=2, seed=0, randomization=RandomizationConfig(enabled=False))
        assert twin.backend.base_model.opt.timestep == pytest.approx(dt)
        twin.reset()
        start = twin.backend._state[:, 0].copy()  # MuJoCo's state rows begin with the time
        twin.step(np.zeros((2, spec.num_actions)))
        assert twin.backend._state[:, 0] - start == pytest.approx(spec.control_dt)
