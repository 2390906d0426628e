"""Every third-party package the code imports is declared in setup.py, the bench extra carries RLlib's own
requirements, and every benchmark's anchors import: a missing package fails here, not in a user's benchmark."""

import ast
import importlib
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.package_info import setup_constants

ROOT = Path(__file__).resolve().parents[1]
OURS = {"edge", "sim", "training", "ros_nodes", "sim2real", "benchmarks", "tests"}
SCANNED = ("edge", "sim", "training", "ros_nodes", "sim2real", "benchmarks")
# imported only where the hardware is (documented in docs/deploy-jetson.md and docs/twin.md): JetPack brings
# TensorRT and cuda-python, Isaac Sim needs an RTX GPU; ROS 2 message packages come with rclpy (apt or ROS_WHEELS)
HARDWARE_ONLY = {"tensorrt", "cuda", "isaacsim"}
ROS_MESSAGES = re.compile(r".*_(msgs|srvs)$|^rclpy$|^builtin_interfaces$|^rcl_interfaces$")


def _declared() -> set[str]:
    ns = setup_constants()
    reqs = [r for extra in ns["EXTRAS"].values() for r in extra] + ["numpy", "pyyaml"]
    return {_norm(Requirement(r).name) for r in reqs}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_modules() -> dict[str, str]:
    """Top-level module name -> one file that imports it, over the code we ship and the benchmarks."""
    found: dict[str, str] = {}
    for folder in SCANNED:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    distributions = metadata.packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imported_modules().items()):
        if module in OURS or module in sys.stdlib_module_names or module == "__future__":
            continue
        if module in HARDWARE_ONLY or ROS_MESSAGES.match(module):
            continue
        dists = {_norm(d) for d in distributions.get(module, [])}
        if not dists & declared:
            missing.append(f"{module} (imported in {where}; distribution {sorted(dists) or 'not installed'})")
    assert not missing, "imported but not declared in setup.py: " + "; ".join(missing)


def test_bench_extra_carries_rllibs_requirements():
    rllib = [Requirement(r) for r in metadata.requires("ray") or []]
    rllib = {
        _norm(r.name) for r in rllib if r.marker and "rllib" in str(r.marker) and r.marker.evaluate({"extra": "rllib"})
    }
    bench = {_norm(Requirement(r).name) for r in setup_constants()["EXTRAS"]["bench"]}
    # gymnasium comes at the twin's version (gymnasium[mujoco]==1.4.0), not RLlib's 1.2.2 pin
    assert rllib - bench == set(), f"ray[rllib] requires {sorted(rllib - bench)}, missing from the bench extra"
    assert "gymnasium" in rllib


@pytest.mark.parametrize(
    "anchor",
    [
        "gymnasium.envs.mujoco.ant_v5",  # twin_throughput
        "envpool",  # twin_throughput
        "stable_baselines3",  # ppo_time_to_threshold
        "ray.rllib.algorithms.ppo",  # ppo_time_to_threshold
        "scipy",  # RLlib imports it when it builds an algorithm
    ],
)
def test_benchmark_anchors_import(anchor):
    importlib.import_module(anchor)


@pytest.mark.parametrize("bench", sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__"))
def test_every_benchmark_module_imports(bench):
    importlib.import_module(f"benchmarks.{bench}")
