import os
from pathlib import Path

import pytest

# Keep BLAS to one thread so the twin's own threads and pytest do not oversubscribe the 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Fast DDS reads its profile when this process creates its first participant (the file says why)
os.environ.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE", str(Path(__file__).with_name("fastdds_profile.xml")))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: Ray Train jobs (tens of seconds); still part of the default run")


@pytest.fixture(scope="session")
def trained_rover(tmp_path_factory):
    """A rover policy trained to the tracking threshold (about 25 PPO iterations, 40 s on 2 idle cores), exported;
    shared by the closed-loop tests (the development venv's nodes, and the installed robot venv's)."""
    from training.ppo.config import PPOConfig
    from training.ppo.launch import train

    cfg = PPOConfig.for_robot(
        "rover", iterations=60, stop_at_threshold=True, seed=0, run_root=str(tmp_path_factory.mktemp("ppo"))
    )
    return train(cfg, show_progress=False) / "policy"


@pytest.fixture(scope="module")
def sft_engine():
    """The session's vLLM engine (training.rlhf.engine.shared_engine) with the minimal SFT weights loaded afresh for
    each module that asks for it (~40 s to start if none runs)."""
    from tests.rlhf_helpers import sft_dir
    from training.rlhf.engine import shared_engine

    return shared_engine(sft_dir())
