"""The twin steps a robot without its visual-only meshes: Menagerie's Go1 with its meshes is 37 MB a model (1024
envs ran out of 24 GB when each held a model copy). A mesh that adds mass stays."""

import numpy as np
import pytest

from sim.robot import build_model, load_robot
from sim.twin import BatchedTwin

MJCF = """<mujoco model="boxbot">
  <asset><mesh name="shell" vertex="0 0 0  0.3 0 0  0 0.2 0  0 0 0.1  0.3 0.2 0.1"/></asset>
  <worldbody>
    <body name="base" pos="0 0 0.3"><freejoint/>
      <geom type="box" size="0.15 0.1 0.05" mass="2"/>
      <geom type="mesh" mesh="shell" contype="0" conaffinity="0" {visual_mass}/>
      <body name="leg" pos="0.1 0 -0.05"><joint name="hip" axis="0 1 0" range="-1 1"/>
        <geom name="foot" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.2"/></body>
    </body>
  </worldbody>
</mujoco>"""


def _robot(tmp_path, visual_mass: str):
    (tmp_path / "boxbot.xml").write_text(MJCF.format(visual_mass=visual_mass))
    (tmp_path / "boxbot.yaml").write_text(
        "name: boxbot\nmjcf: boxbot.xml\nbase_body: base\njoints: [hip]\ndefault_pose: 0.0\nkp: 10.0\nkd: 0.5\n"
        "torque_limit: 5.0\nbase_height: 0.3\n"
    )
    return load_robot(tmp_path / "boxbot.yaml")


@pytest.mark.parametrize(("visual_mass", "kept"), [('density="0"', False), ('mass="0.5"', True)])
def test_visual_meshes_go_only_where_the_bodies_weigh_the_same(tmp_path, visual_mass, kept):
    spec = _robot(tmp_path, visual_mass)
    full = build_model(spec)
    twin = BatchedTwin(spec, num_envs=2, seed=0)
    stepped = twin.backend.base_model
    assert (stepped.nmesh == 1) is kept and full.nmesh == 1
    np.testing.assert_array_equal(stepped.body_mass, full.body_mass)
    np.testing.assert_array_equal(stepped.body_inertia, full.body_inertia)
    twin.reset()
    obs, *_ = twin.step(np.zeros((2, 1)))
    assert np.all(np.isfinite(obs))
