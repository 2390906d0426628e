import os
from pathlib import Path

import pytest

# Keep BLAS to one thread so the twin's own threads and pytest do not oversubscribe the 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Fast DDS reads its profile when this process creates its first participant (the file says why)
os.environ.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE", str(Path(__file__).with_name("fastdds_profile.xml")))


# `make test`'s workers take whole files (--dist loadfile) in collection order (--no-loadscope-reorder): the longest
# first, so that both workers end together, and the minimal RLHF run's builder (test_rlhf_pipeline) among the first,
# so that the files that need it do not wait for it on the other worker. Seconds: each file's own work in a cold
# clean-clone run on 2 cores (pytest --durations, 2026-12-04); files not named follow in their own order.
FILE_SECONDS = {
    "test_cluster.py": 270,
    "test_rlhf_pipeline.py": 160,  # trains the minimal run
    "test_rlhf_base.py": 130,
    "test_retrain_pipeline.py": 125,
    "test_loop.py": 90,
    "test_robot_install.py": 60,
    "test_campaign_backends.py": 50,
    "test_quiet_console.py": 50,
    "test_safe_modes.py": 40,
    "test_rlhf_execution.py": 40,  # trains the shared rover policy
    "test_field_recorder.py": 30,
    "test_fuzz_parsers.py": 30,
    "test_rlhf_reward.py": 30,
    "test_rlhf_gate.py": 25,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0))  # stable: a file's tests keep their order


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: Ray Train jobs (tens of seconds); still part of the default run")


@pytest.fixture(scope="session")
def trained_rover():
    """A rover policy trained to the tracking threshold (about 25 PPO iterations, 40 s on 2 idle cores), exported;
    shared by the closed-loop tests (the development venv's nodes, and the installed robot venv's). Trained once
    per source tree for every test process (pytest-xdist's workers and the launch tests' run) behind a file lock in
    EDGE_TEST_CACHE, as the minimal RLHF run is (tests/rlhf_helpers.py)."""
    from filelock import FileLock

    from tests.rlhf_helpers import ROOT, cache_dir, drop_stale, tree_digest
    from training.ppo.config import PPOConfig
    from training.ppo.launch import train

    root = cache_dir() / "edge-policy-tests"
    name = f"rover-{tree_digest(*(ROOT / d for d in ('training/ppo', 'sim', 'edge', 'config')))}"
    root.mkdir(parents=True, exist_ok=True)
    done = root / f"{name}.policy"  # the finished run's policy directory, written last
    with FileLock(root / f"{name}.lock"):
        drop_stale(root, name)
        if not done.is_file():
            cfg = PPOConfig.for_robot("rover", iterations=60, stop_at_threshold=True, seed=0, run_root=str(root / name))
            policy = train(cfg, show_progress=False) / "policy"
            done.with_suffix(".tmp").write_text(str(policy))
            done.with_suffix(".tmp").replace(done)
        return Path(done.read_text())


@pytest.fixture(scope="module")
def sft_engine():
    """The session's vLLM engine (training.rlhf.engine.shared_engine) with the minimal SFT weights loaded afresh for
    each module that asks for it (~40 s to start if none runs)."""
    from tests.rlhf_helpers import sft_dir
    from training.rlhf.engine import shared_engine

    return shared_engine(sft_dir())
