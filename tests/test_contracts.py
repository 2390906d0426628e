"""Contracts a newcomer can see: no function of the application's packages takes more than MAX_PARAMS parameters.
A longer list is a request (a frozen dataclass, e.g. sim2real.sil.SilRequest) or a step that does too much."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("sim2real", "training", "sim", "edge")
MAX_PARAMS = 7


def parameter_count(args: ast.arguments) -> int:
    """Positional and keyword-only parameters, self or cls not counted; *args and **kwargs count one each."""
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    positional = len(names) - (1 if names and names[0] in ("self", "cls") else 0)
    return positional + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def long_signatures(root: Path) -> list[str]:
    """`path:line name(n)` of every function under `root` with more than MAX_PARAMS parameters."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameter_count(node.args) > MAX_PARAMS:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}({parameter_count(node.args)})")
    return found


def test_no_function_takes_more_than_seven_parameters():
    offenders = [line for package in PACKAGES for line in long_signatures(REPO / package)]
    assert not offenders, "make these take a request dataclass or split them:\n" + "\n".join(offenders)


def test_the_count_is_what_a_caller_passes():
    source = """
class A:
    def method(self, a, b, c, d, e, f, g): ...
    @classmethod
    def build(cls, a, b, c, d, e, f, *, g, h): ...
def free(a, /, b, *rest, c, **extra): ...
def lambda_free(): return lambda a, b, c, d, e, f, g, h: None
"""
    counts = {n.name: parameter_count(n.args) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert counts == {"method": 7, "build": 8, "free": 5, "lambda_free": 0}
