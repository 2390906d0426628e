"""The RLHF artifacts the tests share: one run of the real pipeline (`run_pipeline`, budget "minimal": SFT,
simulated-operator preferences, reward model, two RL iterations with vLLM, held-out evaluation), made once and
kept on disk (pytest's own cache is off here).

The run directory is named by a hash of training/rlhf (less its user-interface modules), edge/instruct and
config/rlhf, so a change to any makes a new run; an unchanged tree resumes the finished run (every stage skipped)
in well under a second. A cold run takes about 2 minutes on 2 idle cores. EDGE_TEST_CACHE moves the cache
(default: the system temporary directory; `.ci/run` gives it an empty one). A file lock makes the test processes
(pytest-xdist's workers) share one run: the first trains it, the others wait and resume it.
The vLLM engine the run starts stays in the process (training.rlhf.engine.shared_engine) for the vLLM tests.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "training" / "rlhf", ROOT / "edge" / "instruct", ROOT / "config" / "rlhf")
RUNNER = (ROOT / "sim2real" / "pipeline.py", ROOT / "sim2real" / "rlhf" / "pipeline.py")  # the run directory's layout
NOT_IN_ARTIFACTS = {"cli.py", "report.py", "pref_page.py", "plot.py"}  # user interface only


def source_digest() -> str:
    """A hash of what the minimal run's artifacts are made from (the modules named above)."""
    files = [
        path
        for folder in SOURCES
        for path in sorted(folder.iterdir())
        if path.is_file() and path.suffix in (".py", ".yaml", ".jsonl") and path.name not in NOT_IN_ARTIFACTS
    ]
    return files_digest([*files, *RUNNER])


def tree_digest(*folders: Path) -> str:
    """A hash of every source, config and model file under `folders`."""
    suffixes = (".py", ".yaml", ".xml", ".json")
    return files_digest(
        path
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts
    )


def files_digest(files: Iterable[Path]) -> str:
    """12 hex digits of a hash over each file's path in the repository and its bytes, in the order given."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    return cache_dir() / "edge-rlhf-tests"


def cache_dir() -> Path:
    return Path(os.environ.get("EDGE_TEST_CACHE", tempfile.gettempdir()))


@functools.cache
def minimal_run() -> dict:
    """run_pipeline's result for the minimal budget: {model_dir, sft_dir, reward_dir, intent_accuracy, ...}."""
    from sim2real.rlhf import run_pipeline

    root = cache_root()
    out = root / f"minimal-{source_digest()}"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f"{out.name}.lock"):
        drop_stale(root, out.name)
        return run_pipeline(out, robot="rover", budget="minimal", engine="vllm")


def drop_stale(root: Path, keep: str) -> None:
    """Removes the builds in `root` of older sources, and their locks: all but those named `keep...` (one untouched
    for an hour is not another session's build in progress)."""
    for stale in root.iterdir():
        if stale.name.startswith(keep) or time.time() - stale.stat().st_mtime < 3600:
            continue
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def sft_dir() -> Path:
    return Path(minimal_run()["sft_dir"])


def reward_dir() -> Path:
    return Path(minimal_run()["reward_dir"])


def prefs_db() -> Path:
    return Path(minimal_run()["sft_dir"]).parent / "prefs" / "prefs.sqlite"


@functools.cache
def base_dir() -> Path:
    """The SmolLM2 base converted once (about 20 s) into EDGE_TEST_CACHE's edge-bases/ and reused by later runs."""
    from training.rlhf.base_model import resolve_base

    cache = cache_dir() / "edge-bases"
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(cache / "convert.lock"):  # one conversion for every test process
        return resolve_base("smollm2-135m-instruct", cache=cache)


def update_mismatch(a: dict, b: dict, start: dict) -> float:
    """|a - b| / |a - start| over all weights: how far two runs from `start` ended apart, against how far they
    moved (Adam scales every update to the learning rate, so a gradient of float noise moves a weight by about lr in
    either run: the runs agree in norm, not weight by weight)."""
    import torch

    apart = torch.sqrt(sum(((a[k] - b[k]) ** 2).sum() for k in start))
    moved = torch.sqrt(sum(((a[k] - start[k]) ** 2).sum() for k in start))
    return float(apart / moved)
