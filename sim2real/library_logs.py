"""Third-party libraries' logging (vLLM, transformers, torch, Ray, ...) goes to the run's log file, so the console
keeps the project's own lines (stage headers, bars, verdicts, the gate's WARN line). vLLM alone writes hundreds of
lines and warnings ("RotaryEmbedding: Failed to load weights" on every weight sync) that say nothing to a user.

    with library_logs(out / LOG_FILE):
        ...  # run the stages

SIM2REAL_DEBUG=1 leaves the libraries' logging as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOG_FILE = "libraries.log"
LIBRARY_LOGGERS = (
    "vllm",
    "transformers",
    "torch",
    "ray",
    "accelerate",
    "peft",
    "huggingface_hub",
    "filelock",
    "urllib3",
    "py.warnings",  # warnings.warn, through logging.captureWarnings
)
# the libraries' progress bars (transformers' shard writer and weight loader, tqdm) and warnings, in this process
# and the ones it spawns: what their logging cannot switch off
QUIET_LIBRARIES = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "PYTHONWARNINGS": "ignore::FutureWarning",
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # torch's C++ warnings (vLLM's CPU worker: "NUMA binding: ...") skip logging
}
# modules that attach their own console handler when first imported: imported first, so their handler exists to
# be replaced (vLLM's is switched off through VLLM_CONFIGURE_LOGGING instead: importing it costs seconds)
_HANDLERS_AT_IMPORT = ("torch", "transformers.utils.logging", "ray")


def quiet_libraries() -> None:
    """Set QUIET_LIBRARIES (where not set) and ignore FutureWarnings, before the libraries are imported: a command
    whose own lines and bars say what happens calls it first. SIM2REAL_DEBUG=1 leaves everything as it is."""
    if os.environ.get("SIM2REAL_DEBUG"):
        return
    for key, value in QUIET_LIBRARIES.items():
        os.environ.setdefault(key, value)
    warnings.filterwarnings("ignore", category=FutureWarning)  # PYTHONWARNINGS reaches only the processes started


@contextmanager
def library_logs(path: str | Path) -> Iterator[None]:
    """Within the block, the LIBRARY_LOGGERS write to `path` (appended; at their own levels, INFO where they set
    none, as vLLM's without its own configuration) and nothing to the console; afterwards they are as they were."""
    if os.environ.get("SIM2REAL_DEBUG"):
        yield
        return
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # read when vllm is imported: no handler of its own
    for module in _HANDLERS_AT_IMPORT:
        if importlib.util.find_spec(module.split(".")[0]) is not None:
            loaded = importlib.import_module(module)
            if module.startswith("transformers"):
                loaded.get_logger()  # transformers adds its handler on the first get_logger
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved = []
    for name in LIBRARY_LOGGERS:
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate, log.level))
        log.handlers, log.propagate = [handler], False
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        for log, handlers, propagate, level in saved:
            log.handlers, log.propagate = handlers, propagate
            log.setLevel(level)
        handler.close()
