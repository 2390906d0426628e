"""`sim2real retrain` and `sim2real lineage`: bad input is one line on stderr and exit status 2."""

import pytest

from sim2real.cli import main
from tests.field_logs import write_log

SCRIPT = [(1.0, 0.5, 0.0, 0.0)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["retrain", "--logs", "{tmp}/none", "--artifact", "{tmp}", "--out", "{tmp}/out"], "no field log at"),
        (["retrain", "--logs", "{tmp}/logs", "--artifact", "{tmp}/policy", "--out", "{tmp}/out"], "manifest"),
        (
            ["retrain", "--logs", "{tmp}/logs", "--artifact", "{tmp}/policy", "--budget", "huge", "--out", "{tmp}/out"],
            "unknown retraining budget 'huge'",
        ),
        (["lineage", "{tmp}", "--registry", "{tmp}/none.sqlite"], "no lineage registry"),
        (
            ["lineage", "not-a-hash", "--registry", "{tmp}/registry.sqlite"],
            "neither an artifact directory nor a sha256",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "logs").mkdir()
    write_log(tmp_path / "logs" / "a.mcap", SCRIPT)
    (tmp_path / "policy").mkdir()
    (tmp_path / "registry.sqlite").touch()
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()  # nothing started


def test_help_has_examples(capsys):
    for command in ("retrain", "lineage"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "examples:" in capsys.readouterr().out
