"""`sim2real sil`, `validate` and `retrain` build their flags from their request dataclasses (SilRequest,
CampaignRequest, RetrainRequest, with edge.signing.TrustPolicy and WatchConfig), as `loop` does from LoopConfig
(tests/test_loop.py): each flag carries its field's help and choices, and a command line parses to the request
the hand-written flags built."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import pytest

from edge.signing import TrustPolicy
from sim.campaign.config import load_campaign
from sim.campaign.runner import CampaignRequest
from sim2real import cli
from sim2real.cli import retrain, sil, validate
from sim2real.retrain import RetrainRequest, WatchConfig
from sim2real.sil import DEFAULT_COMMANDS, SilRequest
from training.retrain.config import DEFAULT_CONFIG
from training.retrain.drift import DEFAULT_TRIGGER

# command -> [(the dataclass, {field: its flag})] for every flag generated from a field
GENERATED = {
    "sil": [
        (SilRequest, dict.fromkeys(sil.FLAGS)),
        (TrustPolicy, dict.fromkeys(f.name for f in dataclasses.fields(TrustPolicy))),
    ],
    "validate": [(CampaignRequest, validate.FLAGS), (TrustPolicy, {"trusted_keys": None, "allow_unsigned": None})],
    "retrain": [
        (RetrainRequest, retrain.FLAGS),
        (TrustPolicy, {"trusted_keys": None}),
        (WatchConfig, retrain.WATCH_FLAGS),
    ],
}
# the arguments that stay the command's own: positional paths, modes, outputs, what a field cannot take as a flag
OWN = {
    "sil": {"help", "json"},
    "validate": {"help", "policy", "campaign", "backend", "out"},
    "retrain": {"help", "logs", "watch", "out", "topic", "dry_run", "json"},
}


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = cli.build_parser(command)
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", sorted(GENERATED))
def test_every_flag_carries_its_fields_help(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping: a help text is one run of words
    parser = _subparser(command)
    actions = {a.dest: a for a in parser._actions}
    text = _words(parser.format_help())
    generated = set()
    for cls, flags in GENERATED[command]:
        for f in dataclasses.fields(cls):
            if f.name not in flags:
                continue
            flag = flags.get(f.name) or f"--{f.name.replace('_', '-')}"
            action = actions[f.name]
            assert flag in action.option_strings, (f.name, action.option_strings)
            assert action.help.startswith(f.metadata["help"].replace("%", "%%")), (f.name, action.help)
            assert action.default is None, f.name  # the field's default stands unless the flag is given
            assert list(action.choices or []) == list(f.metadata.get("choices", [])), f.name
            assert _words(f.metadata["help"]) in text, f.name
            generated.add(f.name)
    assert set(actions) - generated == OWN[command]
    trust = next(f for f in dataclasses.fields(GENERATED[command][0][0]) if f.name == "trust")
    assert f"trust: {_words(trust.metadata['help'])}" in text  # the request says what its trust flags guard


def _parse(command: str, argv: list[str]) -> argparse.Namespace:
    return _subparser(command).parse_args(argv)


def _plain(value):
    """A request as plain data: paths as strings, tuples as lists (the old flags gave str where fields say Path)."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def test_sil_parses_to_the_same_request():
    request = sil.request_of(_parse("sil", ["--artifact", "policy/"]))
    assert _plain(request) == _plain(
        SilRequest(
            "policy/",
            20.0,
            field_twin="",
            commands=str(DEFAULT_COMMANDS),
            record="",
            backend="auto",
            real_time=False,
            instructions=None,
            instruction_model=None,
            instruction_backend="auto",
            robot_python=None,
            trust=TrustPolicy([], False, False),
        )
    )
    argv = ["--artifact", "p", "--duration", "5", "--field-twin", "f.yaml", "--commands", "c.yaml", "--record", "r"]
    argv += ["--backend", "onnxruntime", "--real-time", "--instructions", "i.yaml", "--instruction-model", "m"]
    argv += ["--instruction-backend", "cpu", "--robot-python", "/py", "--trusted-keys", "a.pub", "keys/"]
    argv += ["--gyro-bias", "0", "0", "0.02"]
    argv += ["--allow-unsigned", "--allow-unvalidated", "--json", "kpis.json"]
    every = _parse("sil", argv)
    assert sil.request_of(every) == SilRequest(
        "p",
        5.0,
        field_twin="f.yaml",
        commands="c.yaml",
        record="r",
        backend="onnxruntime",
        real_time=True,
        instructions="i.yaml",
        instruction_model="m",
        instruction_backend="cpu",
        robot_python="/py",
        gyro_bias=(0.0, 0.0, 0.02),
        trust=TrustPolicy(["a.pub", "keys/"], True, True),
    )
    assert every.json == "kpis.json"
    assert sil.request_of(_parse("sil", ["--artifact", "p", "--trusted-keys"])).trust == TrustPolicy()


def test_a_value_out_of_its_fields_range_is_one_line(capsys):
    assert cli.main(["sil", "--artifact", "p", "--duration", "0"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "sim2real sil: error: SilRequest: duration must be a positive number, got 0.0 (simulated seconds to run)\n"
    )


def test_validate_parses_to_the_same_request(tmp_path):
    from edge.manifest import load_manifest
    from tests.campaign_helpers import export_rover_policy

    policy = str(export_rover_policy(tmp_path / "policy"))
    sha = load_manifest(policy).policy["sha256"]
    quick = load_campaign("quick")
    request = validate.request_of(_parse("validate", [policy, "--campaign", "quick"]))
    assert request == CampaignRequest(
        policy,
        quick,
        Path("runs") / "validation" / f"quick-{sha[:12]}",
        workers=1,
        ray_address=None,
        fresh=False,
        compare_to=None,
        promote_verdict=True,
        signing_key=None,
        trust=TrustPolicy([], allow_unsigned=False),
    )
    argv = [policy, "--campaign", "quick", "--workers", "2", "--ray-address", "auto", "--out", str(tmp_path / "o")]
    argv += ["--fresh", "--compare", "old/", "--no-promote", "--sign-key", "k.key", "--trusted-keys", "a.pub"]
    argv += ["--allow-unsigned"]
    assert validate.request_of(_parse("validate", argv)) == CampaignRequest(
        policy,
        quick,
        tmp_path / "o",
        workers=2,
        ray_address="auto",
        fresh=True,
        compare_to="old/",
        promote_verdict=False,
        signing_key="k.key",
        trust=TrustPolicy(["a.pub"], allow_unsigned=True),
    )


def test_retrain_parses_to_the_same_request():
    request = retrain.request_of(_parse("retrain", ["--logs", "logs/", "--artifact", "policy/", "--out", "o"]))
    assert request == RetrainRequest(
        Path("logs/"),
        Path("policy/"),
        Path("o"),
        budget="quick",
        registry=Path("runs/registry.sqlite"),
        force=False,
        config=Path(DEFAULT_CONFIG),
        trigger=DEFAULT_TRIGGER,  # the hand-written flags gave None, which the pipeline read as this file
        signing_key=None,
        trust=TrustPolicy([]),
        topics={},
    )
    argv = ["--watch", "w/", "--artifact", "p/", "--budget", "minimal", "--registry", "r.sqlite", "--force"]
    argv += ["--config", "c.yaml", "--trigger", "t.yaml", "--sign-key", "k.key", "--trusted-keys", "a.pub"]
    argv += ["--topic", "odom=/wheel/odom", "--debounce", "0.5", "--exit-when-idle", "3"]
    args = _parse("retrain", argv)
    assert retrain.request_of(args) == RetrainRequest(
        Path("w/"),
        Path("p/"),
        Path("runs/retrain/watch"),
        budget="minimal",
        registry=Path("r.sqlite"),
        force=True,
        config=Path("c.yaml"),
        trigger=Path("t.yaml"),
        signing_key=Path("k.key"),
        trust=TrustPolicy(["a.pub"]),
        topics={"odom": "/wheel/odom"},
    )
    assert retrain.watch_config_of(args) == WatchConfig(debounce_s=0.5, idle_exit_s=3.0)
    assert retrain.watch_config_of(_parse("retrain", argv[:2] + ["--artifact", "p/"])) == WatchConfig()
