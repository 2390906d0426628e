"""A Go1-class quadruped written as its own MJCF, the way a user brings a robot: 12 position actuators with their
own gains and force ranges, joint damping, friction loss and armature, a `home` keyframe, foot geoms named
*_foot, and no floor (the twin adds one). The masses, link lengths and joint ranges are those of a Unitree Go1
(12 kg, 0.213 m thigh and calf); the geometry is capsules and boxes, the collision shapes such models use.

benchmarks/locomotion.py --mjcf go1-class brings it through `sim2real robot init` and trains it on the default
legged task. A user's own file goes the same way: --mjcf path/to/robot.xml.
"""

from __future__ import annotations

from pathlib import Path

HIP_X, HIP_Y, THIGH_Y = 0.1881, 0.04675, 0.08  # m: hip joints from the trunk centre, thigh from the hip
LINK = 0.213  # m: thigh and calf length
HOME = (0.0, 0.9, -1.8)  # abduction, hip, knee (rad)
HOME_Z = 0.29  # m: trunk height in the home pose (feet just above the floor)

MJCF = """<mujoco model="go1_class">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.004"/>
  <default>
    <geom friction="0.8 0.02 0.01" condim="3" contype="1" conaffinity="1"/>
    <joint axis="0 1 0" damping="0.5" armature="0.01" frictionloss="0.1"/>
    <position kp="50" kv="1" forcerange="-23.7 23.7"/>
    <default class="abduction">
      <joint axis="1 0 0" range="-0.863 0.863"/><position ctrlrange="-0.863 0.863"/>
    </default>
    <default class="hip">
      <joint range="-0.686 4.501"/><position ctrlrange="-0.686 4.501"/>
    </default>
    <default class="knee">
      <joint range="-2.818 -0.888"/><position ctrlrange="-2.818 -0.888" forcerange="-35.55 35.55"/>
    </default>
  </default>
  <worldbody>
    <body name="trunk" pos="0 0 @Z@">
      <freejoint/>
      <inertial pos="0.0223 0.002 -0.0005" mass="5.204" diaginertia="0.0168 0.063 0.0717"/>
      <geom type="box" size="0.1881 0.04675 0.057"/>
      <site name="imu"/>
@LEGS@
    </body>
  </worldbody>
  <actuator>
@ACTUATORS@
  </actuator>
  <keyframe>
    <key name="home" qpos="0 0 @Z@ 1 0 0 0 @QPOS@" ctrl="@QPOS@"/>
  </keyframe>
</mujoco>
"""

LEG = """      <body name="@N@_hip" pos="@X@ @Y@ 0">
        <inertial pos="0 0 0" mass="0.68" diaginertia="0.0007 0.0005 0.0004"/>
        <joint class="abduction" name="@N@_hip_joint"/>
        <geom type="cylinder" size="0.046 0.02" quat="1 1 0 0"/>
        <body name="@N@_thigh" pos="0 @TY@ 0">
          <inertial pos="-0.003 0 -0.03" mass="1.009" diaginertia="0.0048 0.0046 0.0007"/>
          <joint class="hip" name="@N@_thigh_joint"/>
          <geom type="capsule" size="0.015" fromto="0 0 0 0 0 -@L@"/>
          <body name="@N@_calf" pos="0 0 -@L@">
            <inertial pos="0.004 0 -0.146" mass="0.196" diaginertia="0.0015 0.0015 0.00004"/>
            <joint class="knee" name="@N@_calf_joint"/>
            <geom type="capsule" size="0.01" fromto="0 0 0 0 0 -0.19"/>
            <geom name="@N@_foot" type="sphere" size="0.023" pos="0 0 -@L@"/>
          </body>
        </body>
      </body>"""

LEGS = {"FR": (1, -1), "FL": (1, 1), "RR": (-1, -1), "RL": (-1, 1)}  # actuator order, as Go1's


def go1_class_mjcf(path: Path) -> Path:
    """Write the robot's MJCF to `path`; returns it."""
    legs = "\n".join(
        LEG.replace("@N@", n)
        .replace("@X@", f"{sx * HIP_X:g}")
        .replace("@Y@", f"{sy * HIP_Y:g}")
        .replace("@TY@", f"{sy * THIGH_Y:g}")
        .replace("@L@", f"{LINK:g}")
        for n, (sx, sy) in LEGS.items()
    )
    actuators = "\n".join(
        f'    <position class="{c}" name="{n}_{j}" joint="{n}_{j}_joint"/>'
        for n in LEGS
        for j, c in (("hip", "abduction"), ("thigh", "hip"), ("calf", "knee"))
    )
    qpos = " ".join(f"{v:g}" for _ in LEGS for v in HOME)
    xml = MJCF.replace("@LEGS@", legs).replace("@ACTUATORS@", actuators).replace("@QPOS@", qpos)
    path.write_text(xml.replace("@Z@", f"{HOME_Z:g}"))
    return path
