"""Heightfield terrain: the generator (seeded, bounded, each type's shape), the robot on it in real MuJoCo, the
curriculum's rule, a short PPO run on a terrain task, and a campaign scenario on terrain."""

import dataclasses
import json
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from campaign_helpers import TINY_CAMPAIGN, export_rover_policy

from sim.backends import make_backend
from sim.campaign.commands import compile_sequence
from sim.campaign.config import CampaignError, campaign_from_dict, load_campaign
from sim.campaign.results import RESULTS_FILE
from sim.campaign.runner import CampaignRequest, run_campaign
from sim.errors import SimError
from sim.robot import build_model, load_robot
from sim.tasks import load_task
from sim.terrain import TerrainConfig, TerrainCurriculum, TerrainGrid, height_bounds, sub_terrain, terrain_grid
from sim.terrain.mjspec import add_terrain, cell_hfields, set_heights
from sim.twin import BatchedTwin
from training.ppo.config import PPOConfig
from training.ppo.runner import PPORunner

REPO = Path(__file__).resolve().parents[1]
ALL = TerrainConfig(types=("flat", "rough", "slopes", "stairs"), levels=4)


def test_generator_is_seeded_and_bounded():
    a, b = terrain_grid(ALL), terrain_grid(ALL)
    other = terrain_grid(dataclasses.replace(ALL, seed=1))
    assert a.shape == (4, 4, 121, 121) and np.array_equal(a, b)
    rough = ALL.types.index("rough")
    assert not np.array_equal(a[1:, rough], other[1:, rough])  # level 0 has difficulty 0: flat
    assert np.array_equal(np.delete(a, rough, axis=1), np.delete(other, rough, axis=1))  # only noise is seeded
    lo, hi = height_bounds(ALL)
    assert lo <= a.min() and a.max() <= hi
    for level in range(ALL.levels):  # rough stays within its amplitude at each level's difficulty
        amplitude = ALL.rough_amplitude * ALL.level_difficulty(level)
        assert np.abs(a[level, rough]).max() <= amplitude + 1e-6
    assert np.abs(a[-1, rough]).max() > 0.8 * ALL.rough_amplitude  # and uses it


def test_each_type_has_the_shape_it_claims():
    cfg = TerrainConfig(types=("slopes", "stairs"), slope_deg=20.0, step_height=(0.1, 0.1), step_width=0.3)
    rng = np.random.default_rng(0)
    mid = 60  # the centre sample of 121
    assert not sub_terrain(cfg, "flat", 1.0, rng).any()

    slope = sub_terrain(cfg, "slopes", 0.5, rng)[mid]  # a row through the centre, x from -6 to 6 m
    x = np.linspace(-6, 6, 121)
    assert np.all(np.diff(slope[: mid + 1]) >= -1e-9) and np.all(np.diff(slope[mid:]) <= 1e-9)  # up, then down
    ramp = (np.abs(x) < cfg.size / 2 - 0.05) & (np.abs(x) > cfg.platform / 2 + 0.05)
    angle = np.degrees(np.arctan(np.abs(np.gradient(slope, x)[ramp])))
    assert np.allclose(angle, 10.0)  # slope_deg x difficulty
    assert np.all(slope[np.abs(x) > cfg.size / 2] == 0) and np.ptp(slope[np.abs(x) <= cfg.platform / 2]) == 0

    stairs = sub_terrain(cfg, "stairs", 1.0, rng)[mid]
    rises = np.diff(stairs[: mid + 1])
    assert np.allclose(rises[rises != 0], 0.1)  # every riser one step height, all going up to the platform
    assert np.count_nonzero(rises) == 10  # (8 - 2) / 2 / 0.3 treads
    assert math.isclose(stairs.max(), 1.0, abs_tol=1e-9)


def test_height_query_is_mujocos_surface():
    """height_at answers what a ray cast straight down onto the compiled heightfield meets, on every type."""
    spec = load_robot("quadruped")
    grid = TerrainGrid(dataclasses.replace(ALL, levels=1, difficulty=(1.0, 1.0)))
    model = build_model(spec, lambda mj: add_terrain(mj, grid))
    set_heights(model, grid)
    data = mujoco.MjData(model)
    xy = np.random.default_rng(0).uniform(-grid.half_extent, grid.half_extent, (200, 2)) * 0.999
    geom = np.zeros(1, np.int32)
    for t in range(grid.num_types):
        model.geom_dataid[model.geom("terrain").id] = cell_hfields(model, grid)[0, t]
        mujoco.mj_forward(model, data)
        ray = [3.0 - mujoco.mj_ray(model, data, [x, y, 3.0], [0, 0, -1.0], None, 1, -1, geom) for x, y in xy]
        assert np.allclose(grid.height_at(np.zeros(200, int), np.full(200, t), xy), ray, atol=1e-6)


def test_terrain_replaces_the_floor_and_serves_an_mjcf_without_one(tmp_path):
    spec = load_robot("quadruped")
    grid = TerrainGrid(TerrainConfig(types=("slopes",), difficulty=(1.0, 1.0)))
    model = build_model(spec, lambda mj: add_terrain(mj, grid))
    kinds = model.geom_type[model.geom_bodyid == 0].tolist()
    assert kinds.count(mujoco.mjtGeom.mjGEOM_PLANE) == 0 and kinds.count(mujoco.mjtGeom.mjGEOM_HFIELD) == 1
    terrain = model.geom("terrain").id
    assert (model.geom_contype[terrain], model.geom_conaffinity[terrain]) == (0, 1)  # the floor's settings

    xml = spec.mjcf.read_text()
    (tmp_path / "nofloor.xml").write_text("\n".join(line for line in xml.splitlines() if 'name="floor"' not in line))
    raw = yaml.safe_load((REPO / "config" / "robots" / "quadruped.yaml").read_text())
    (tmp_path / "nofloor.yaml").write_text(yaml.safe_dump({**raw, "mjcf": "nofloor.xml"}))
    bare = load_robot(tmp_path / "nofloor.yaml")
    task = dataclasses.replace(load_task(spec), terrain=grid.cfg)
    twin = BatchedTwin(bare, 1, task=task, randomization=task.randomization.nominal(), nthread=1)
    twin.reset()
    for _ in range(25):
        _, _, terminated, _, _ = twin.step(np.zeros((1, bare.num_actions)))
    state = twin.backend.state()
    assert not terminated.any() and 0.25 < twin.base_height(state)[0] < 0.35  # standing on the slope's top
    assert state["base_pos"][0, 2] > 1.3
    twin.close()


def test_robot_rests_on_the_terrain_under_it():
    """Two envs of one twin on two cells: rough ground (each foot on the heights under it, not z = 0) and the top
    of a flight of stairs (the base at the platform plus its stance, and not terminated for being high)."""
    spec = load_robot("quadruped")
    base = load_task(spec)
    terrain = TerrainConfig(types=("rough", "stairs"), difficulty=(1.0, 1.0))
    task = dataclasses.replace(base, terrain=terrain)
    twin = BatchedTwin(spec, 2, seed=0, task=task, randomization=base.randomization.nominal(), nthread=1)
    twin.reset()
    for _ in range(50):  # 1 s holding the default pose
        _, _, terminated, truncated, _ = twin.step(np.zeros((2, spec.num_actions)))
        assert not terminated.any() and not truncated.any()
    state = twin.backend.state()
    grid = twin.terrain
    assert twin.curriculum.types.tolist() == [0, 1]
    # the stairs env stands on its platform, 2 m up, as high above it as the rough env stands above its ground
    assert math.isclose(grid.spawn_heights[0, 1], 2.0, abs_tol=1e-6)
    assert state["base_pos"][1, 2] > 2.2
    height = twin.base_height(state)
    assert abs(height[1] - height[0]) < 0.03 and 0.25 < height[0] < 0.35

    data = twin.backend.mjdata(0)
    model = twin.backend.model(0)
    feet = [model.geom(name).id for name in spec.feet]
    xy, z = data.geom_xpos[feet, :2], data.geom_xpos[feet, 2] - model.geom_size[feet, 0]
    ground = grid.height_at(np.zeros(4, int), np.zeros(4, int), xy)
    assert np.allclose(z, ground, atol=0.006)  # each foot on the terrain under it (within contact penetration)
    assert np.abs(ground).max() > 0.012  # which is not the floor at z = 0
    # the foot terms measure from that ground too: a standing foot (its sensor at the sphere's centre) is one
    # radius above it on rough ground and on the stairs' platform alike, not 2 m up
    radius = model.geom_size[feet, 0]
    assert np.allclose(twin.feet.height, radius, atol=0.008), twin.feet.height
    twin.close()


def test_curriculum_moves_levels_by_distance_walked():
    cfg = TerrainConfig(types=("rough", "stairs"), levels=5, size=8.0)
    cur = TerrainCurriculum(cfg, 6)
    assert cur.types.tolist() == [0, 0, 0, 1, 1, 1]
    cur.levels[:] = [2, 2, 2, 0, 4, 4]
    rng = np.random.default_rng(0)
    # walked far / too little for its command / enough for its command / too little at level 0 / far at the top /
    # nothing on a zero command
    distance = np.array([4.5, 1.0, 3.0, 0.0, 5.0, 0.0])
    commanded = np.array([10.0, 10.0, 5.0, 10.0, 10.0, 0.0])
    cur.update(np.arange(6), distance, commanded, rng)
    assert cur.levels[[0, 1, 2, 3, 5]].tolist() == [3, 1, 2, 0, 4]
    assert 0 <= cur.levels[4] < 5  # solved the top level: a random one
    cur.update(np.array([0]), np.array([0.0]), np.array([10.0]), rng)  # only the envs reset move
    assert cur.levels[:4].tolist() == [2, 1, 2, 0]

    random = TerrainCurriculum(dataclasses.replace(cfg, curriculum=False), 1000)
    random.start(np.arange(1000), rng)
    assert set(random.levels.tolist()) == set(range(5))  # without curriculum, any level


def test_twin_moves_levels_at_reset_and_snapshots_them():
    spec = load_robot("quadruped")
    base = load_task(spec)
    terrain = TerrainConfig(types=("slopes",), levels=4, max_init_level=3)
    task = dataclasses.replace(base, terrain=terrain, episode_length_s=0.1)
    twin = BatchedTwin(spec, 8, seed=3, task=task, nthread=1)
    twin.reset()
    before = twin.curriculum.levels.copy()
    twin.set_commands(np.array([1.0, 0.0, 0.0]))  # a 0.1 m walk asked for; standing still walks less than half
    for _ in range(5):
        _, _, _, truncated, info = twin.step(np.zeros((8, spec.num_actions)))
    assert truncated.all() and info["terrain_level"].tolist() == before.tolist()  # the levels the episodes ran on
    assert twin.curriculum.levels.tolist() == np.maximum(before - 1, 0).tolist()

    snapshot = twin.state_dict()
    other = BatchedTwin(spec, 8, seed=4, task=task, nthread=1)
    other.reset()
    other.load_state_dict(snapshot)
    assert other.curriculum.levels.tolist() == twin.curriculum.levels.tolist()
    cells, c = cell_hfields(twin.backend.base_model, twin.terrain), other.curriculum
    terrain = twin.backend.base_model.geom("terrain").id
    for i in range(8):  # each env stands on its cell's heightfield again
        assert other.backend.model(i).geom_dataid[terrain] == cells[c.levels[i], c.types[i]]
    twin.close()
    other.close()


def test_short_training_run_on_terrain_reports_the_level(tmp_path):
    task = tmp_path / "terrain_task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "episode_length_s": 0.2,  # every env resets within the run: the curriculum moves
                "terrain": {"types": ["rough", "slopes", "stairs"], "levels": 4, "max_init_level": 3},
            }
        )
    )
    cfg = PPOConfig.for_robot(
        "quadruped",
        task=str(task),
        num_envs=6,
        num_steps_per_env=8,
        num_mini_batches=2,
        iterations=2,
        checkpoint_every=2,
        eval_every=0,
        eval_envs=3,
        eval_seconds=0.1,
        run_root=str(tmp_path),
        export=False,
    )
    runner = PPORunner(cfg, tmp_path / "run")
    assert runner.env.twin.terrain is not None
    summary = runner.learn()
    runner.close()
    assert summary["status"] == "completed"
    records = [json.loads(line) for line in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    levels = [r["Terrain/level"] for r in records if r["type"] == "iteration"]
    assert len(levels) == 2 and all(0.0 <= v <= 3.0 for v in levels)


def test_campaign_scenario_on_terrain_runs(tmp_path):
    raw = {
        **TINY_CAMPAIGN,
        "axes": {"commands": ["forward"], "terrain": ["flat", "rough"]},
        "terrains": {"flat": {}, "rough": {"types": ["rough"], "difficulty": [0.25, 0.25]}},
        "gates": {**TINY_CAMPAIGN["gates"], "per_axis": {"terrain": 0.5}},
    }
    cfg = campaign_from_dict(raw, "terrain.yaml")
    outcome = run_campaign(
        CampaignRequest(export_rover_policy(tmp_path / "policy"), cfg, tmp_path / "out", promote_verdict=False)
    )
    rows = [json.loads(line) for line in (tmp_path / "out" / RESULTS_FILE).read_text().splitlines()]
    episodes = {r["axes"]["terrain"]: r for r in rows if r.get("type") == "episode"}
    assert sorted(episodes) == ["flat", "rough"] and outcome.passed
    assert episodes["rough"]["kpis"]["falls"] == 0 and episodes["rough"]["steps"] == 50


def test_shipped_terrain_campaign_keeps_each_episode_on_its_heightfield():
    cfg = load_campaign("terrain")
    assert set(cfg.axes["terrain"]) == {"flat", "rough", "slopes", "stairs"} and cfg.gates.per_axis["terrain"]
    limits = load_robot("quadruped").command_limits
    dt = 0.02
    for seq in cfg.commands.values():
        cmd = compile_sequence(seq, limits, dt, int(cfg.episode_s / dt))
        reach = np.linalg.norm(cmd[:, :2], axis=1).sum() * dt
        for name in cfg.axes["terrain"]:
            terrain = cfg.terrains[name]
            assert terrain.enabled == (name != "flat") and (name == "flat" or terrain.types == (name,))
            assert reach < terrain.size / 2


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"axes": {"terrain": ["ice"]}, "terrains": {"rough": {"types": ["rough"]}}}, "terrain(s) ice not in terrains"),
        ({"axes": {"terrain": ["a"]}, "terrains": {"a": {"types": ["lava"]}}}, "unknown value(s) lava"),
        (
            {"axes": {"terrain": ["a"]}, "terrains": {"a": {"size": 8, "hills": 1}}},
            "c.yaml: unknown key(s) hills in terrains.a",
        ),
        (
            {"backend": "newton", "axes": {"terrain": ["a"]}, "terrains": {"a": {"types": ["rough"]}}},
            "terrains need the mujoco backend",
        ),
    ],
)
def test_bad_campaign_terrains_fail_with_one_line(raw, message):
    with pytest.raises(CampaignError) as info:
        campaign_from_dict(raw, "c.yaml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_task_terrain_section_is_checked(tmp_path):
    spec = load_robot("quadruped")
    assert not load_task(spec).terrain.enabled  # the shipped task: the robot's own floor
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"terrain": {"types": ["stairs"], "step_width": 0.35, "levels": 3}}))
    assert load_task(spec, path).terrain == TerrainConfig(types=("stairs",), step_width=0.35, levels=3)
    for bad, message in [
        ({"types": ["stairs"], "platform": 9.0}, "platform 9.0 must be smaller than the sub-terrain size"),
        ({"types": ["slopes"], "slope_deg": 95}, "slope_deg must be"),
        ({"types": ["slopes"], "levels": 2, "max_init_level": 2}, "max_init_level 2 must be below levels"),
    ]:
        path.write_text(yaml.safe_dump({"terrain": bad}))
        with pytest.raises(SimError, match="t.yaml: terrain") as info:
            load_task(spec, path)
        assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(SimError, match="terrain needs the mujoco backend"):
        make_backend("newton", spec, 1, terrain=TerrainGrid(TerrainConfig(types=("flat",))))
