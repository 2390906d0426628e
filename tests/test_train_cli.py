"""`sim2real train`: bad input gets one clear line and exit status 2, before anything heavy starts."""

import pytest

from sim2real import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--robot", "hovercraft"], "unknown robot 'hovercraft'"),
        (["--robot", "rover", "--envs", "0"], "num_envs must be a positive integer"),
        (["--robot", "rover", "--envs", "3", "--workers", "2"], "cannot be split evenly over 2 workers"),
        (["--robot", "rover", "--envs", "4000000000"], "need about"),
        (["--robot", "rover", "--config", "{bad"], "does not exist"),
        (["--resume", "/nonexistent/run"], "no such run directory or checkpoint"),
        (["--sweep", "/nonexistent/sweep.yaml"], "sweep file /nonexistent/sweep.yaml does not exist"),
        ([], "give --robot"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    assert cli.main(["train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("sim2real train: error:") and message in err, err


def test_malformed_config_file(tmp_path, capsys):
    bad = tmp_path / "ppo.yaml"
    bad.write_text("num_envs: [1, 2\n")
    assert cli.main(["train", "--robot", "rover", "--config", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    bad.write_text("num_envz: 12\n")
    assert cli.main(["train", "--robot", "rover", "--config", str(bad)]) == 2
    assert "unknown key(s) num_envz" in capsys.readouterr().err


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert "sim2real train --resume" in capsys.readouterr().out


def test_resume_with_another_shape_is_refused(tmp_path, capsys):
    from training.ppo.config import PPOConfig
    from training.ppo.launch import train

    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=32,
        num_steps_per_env=8,
        iterations=1,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path),
        export=False,
    )
    run_dir = train(cfg, show_progress=False)
    assert cli.main(["train", "--resume", str(run_dir), "--envs", "64"]) == 2
    assert "was trained with num_envs=32, this run has 64" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(run_dir), "--workers", "2", "--envs", "32"]) == 2
    assert "written by 1 worker(s); resume with --workers 1" in capsys.readouterr().err
