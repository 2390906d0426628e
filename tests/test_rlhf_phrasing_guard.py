"""The phrasing set (config/rlhf/phrasings.jsonl) is never read by training or checkpoint selection: SFT, preference
collection, the reward model and RL (with its validation selection) each run a few steps on the minimal run's
artifacts under an audit hook that records every file the process opens (Python's `open` audit event covers
builtins.open, pathlib and io). None of them may open the phrasing set; the pipeline's evaluation does."""

import contextlib
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from sim2real.rlhf import PHRASINGS
from tests.rlhf_helpers import prefs_db, reward_dir, sft_dir
from training.rlhf.config import PrefsConfig, RewardConfig, RLConfig, SFTConfig
from training.rlhf.model import ModelConfig

_opened: list[str] | None = None  # files opened while a block is watched
_lock = threading.Lock()


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, Path)):
        with _lock:
            _opened.append(str(Path(args[0]).resolve()))


sys.addaudithook(_audit)  # a hook cannot be removed: it records only inside `opened_files`


@contextlib.contextmanager
def opened_files() -> Iterator[list[str]]:
    """The resolved paths the process opened inside the block."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def _train_every_stage(tmp: Path) -> None:
    from training.rlhf.prefs import collect_pairs
    from training.rlhf.reward_model import train_reward
    from training.rlhf.rl import RLTrainer
    from training.rlhf.sft import train_sft

    tiny = ModelConfig(vocab_size=320, hidden_size=64, num_layers=1, num_heads=1, intermediate_size=64)
    train_sft(SFTConfig(out=str(tmp / "sft"), examples=64, steps=2, batch_size=8, eval_examples=2, model=tiny))
    collect_pairs(PrefsConfig(db=str(tmp / "prefs.sqlite"), model=str(sft_dir()), pairs=2, engine="transformers"))
    shutil.copy(prefs_db(), tmp / "rated.sqlite")
    train_reward(RewardConfig(out=str(tmp / "reward"), model=str(sft_dir()), db=str(tmp / "rated.sqlite"), epochs=1))
    config = RLConfig(
        out=str(tmp / "rl"),
        model=str(sft_dir()),
        reward_model=str(reward_dir()),
        engine="transformers",
        iterations=1,
        prompts_per_iteration=2,
        validation_examples=4,
        validate_every=1,
    )
    trainer = RLTrainer(config)
    try:
        trainer.train()
    finally:
        trainer.close()


def test_no_training_stage_opens_the_phrasing_set(tmp_path):
    from training.rlhf.evaluate import load_eval_set

    phrasings = str(PHRASINGS.resolve())
    with opened_files() as opened:
        load_eval_set(PHRASINGS)  # the hook sees a read of the set: this test can fail
    assert phrasings in opened
    with opened_files() as opened:
        _train_every_stage(tmp_path)
    assert opened, "the hook recorded nothing: it cannot vouch for the stages"
    assert any(p.endswith("rated.sqlite") for p in opened)  # it saw the stages' own files
    assert phrasings not in opened
