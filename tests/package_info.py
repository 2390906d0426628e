"""setup.py's module-level constants (EXTRAS, ROS_WHEELS, ...) as the tests read them, without running setup()."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_constants() -> dict:
    tree = ast.parse((ROOT / "setup.py").read_text())
    body = [n for n in tree.body if isinstance(n, ast.Assign)]
    namespace: dict = {}
    exec(compile(ast.Module(body=body, type_ignores=[]), "setup.py", "exec"), namespace)
    return namespace
