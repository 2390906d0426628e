import os
from pathlib import Path

import pytest

# Keep BLAS to one thread so the twin's own threads and pytest do not oversubscribe the 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Fast DDS reads its profile when this process creates its first participant (the file says why)
os.environ.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE", str(Path(__file__).with_name("fastdds_profile.xml")))


# `make test`'s workers take whole files (--dist loadfile) in collection order (--no-loadscope-reorder). The longest
# go first, so that both workers end together, in an order that never leaves one waiting for the other's build of
# the minimal RLHF run (test_rlhf_pipeline builds it, about 140 s): the retraining pipeline beside it, then the Ray
# cluster (whose RL and loop tests need the run). Each file's own wall time beside the other worker, in a cold
# clean-clone run on 2 cores, is beside it; files not named follow in their own order.
FILE_ORDER = (
    "test_rlhf_pipeline.py",  # 155 s, the minimal run's build
    "test_retrain_pipeline.py",  # 115, trains the shared rover policy (trained_rover) beside the build
    "test_cluster.py",  # 325, the loop end to end included
    "test_rlhf_base.py",  # 105
    "test_robot_install.py",  # 40
    "test_campaign_backends.py",  # 45
    "test_quiet_console.py",  # 40
    "test_safe_modes.py",  # 35
    "test_field_recorder.py",  # 30
    "test_rlhf_reward.py",  # 25
    "test_rlhf_gate.py",  # 25
    "test_fuzz_parsers.py",  # 15
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FILE_ORDER)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FILE_ORDER)))  # stable: a file's tests keep their order


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: Ray Train jobs (tens of seconds); still part of the default run")


@pytest.fixture(scope="session")
def trained_rover():
    """A rover policy trained on the nominal twin to the tracking threshold (about 25 PPO iterations, 40 s on 2 idle
    cores), exported and validated by the quick campaign (its verdict in the manifest); shared by the closed-loop
    tests (the development venv's nodes, and the installed robot venv's) and by the retraining tests as the deployed
    artifact. Trained once per source tree for every test process (pytest-xdist's workers and the launch tests'
    run) behind a file lock in EDGE_TEST_CACHE, as the minimal RLHF run is (tests/rlhf_helpers.py). Read-only for
    its users: a test that changes an artifact copies it first."""
    from filelock import FileLock

    from edge.fileio import atomic_write_bytes
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign
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
            cfg = PPOConfig.for_robot(
                "rover", randomization=False, iterations=60, stop_at_threshold=True, seed=0, run_root=str(root / name)
            )
            run = train(cfg, show_progress=False)
            run_campaign(CampaignRequest(run / "policy", load_campaign("quick"), run / "validation"))
            atomic_write_bytes(done, str(run / "policy").encode())
        return Path(done.read_text())


@pytest.fixture(scope="module")
def sft_engine():
    """The session's vLLM engine (training.rlhf.engine.shared_engine) with the minimal SFT weights loaded afresh for
    each module that asks for it (~40 s to start if none runs)."""
    from tests.rlhf_helpers import sft_dir
    from training.rlhf.engine import shared_engine

    return shared_engine(sft_dir())
