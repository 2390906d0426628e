"""training.rlhf's package face: every name in __all__ resolves, and importing the package or reading a config
loads neither torch, transformers nor vLLM (the names import on first use)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_face_imports_on_first_use():
    code = (
        "import sys, training.rlhf; from training.rlhf import RLConfig, load_config; load_config(RLConfig);"
        "heavy = {'torch', 'transformers', 'vllm'} & set(sys.modules); assert not heavy, heavy;"
        "from training.rlhf import *; import training.rlhf as r;"
        "found = [getattr(r, n) for n in r.__all__];"
        "assert all(f.__module__.startswith('training.rlhf.') for f in found if callable(f));"
        "assert RLTrainer.__module__ == 'training.rlhf.rl' and callable(group_advantages)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
