"""The CLI's error contract: a user-fixable error (edge.errors.UserFixableError, from any package) is one line on
stderr and exit 2; any other exception is a bug and keeps its traceback."""

import subprocess
import sys
import types

import pytest

from edge.errors import UserFixableError
from sim import errors as sim_errors
from sim2real import cli
from training import errors as training_errors


def _install(monkeypatch, exc: BaseException) -> None:
    """A subcommand whose run raises `exc`, registered the way real subcommands are (a module name)."""
    module = types.ModuleType("tests_fake_subcommand")
    module.HELP, module.EXAMPLES = "raises", ""
    module.add_arguments = lambda parser: None

    def run(args):
        raise exc

    module.run = run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.SUBCOMMANDS, "fake", module.__name__)


@pytest.mark.parametrize(
    "exc",
    [
        sim_errors.RobotConfigError("robot.yaml: joint 'hip' is not in the MJCF"),
        training_errors.ConfigError("ppo.yaml: lr must be positive"),
        UserFixableError("a user mistake"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(monkeypatch, capsys, exc):
    _install(monkeypatch, exc)
    assert cli.main(["fake"]) == 2
    err = capsys.readouterr().err
    assert err == f"sim2real fake: error: {exc}\n"


@pytest.mark.parametrize("exc", [ValueError("a bug"), KeyError("missing"), FileNotFoundError("internal path")])
def test_bugs_keep_their_traceback(monkeypatch, exc):
    _install(monkeypatch, exc)
    with pytest.raises(type(exc)):
        cli.main(["fake"])


def test_a_bad_robot_is_one_line_from_the_console_script(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "demo", "--robot", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr and "nope.yaml" in out.stderr
