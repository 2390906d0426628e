"""edge.config: the one validating loader of config dataclasses, the flags generated from their fields, and the
project's configs loaded through it."""

from __future__ import annotations

import argparse
import dataclasses
import random
from dataclasses import dataclass, field
from typing import Literal

import pytest
import yaml

from edge.config import add_flags, allowed, check_values, flag_values, load_dataclass, setting
from edge.errors import ConfigError
from edge.resources import config_path
from sim.robot import RobotConfig
from sim2real import cli
from training import errors as training_errors
from training.ppo.config import PPOConfig
from training.ppo.sweep import SweepSpec
from training.retrain.config import RetrainConfig
from training.retrain.drift import TriggerPolicy
from training.rlhf.config import (
    ENGINES,
    INSTRUCTION_BACKENDS,
    RLHF_CONFIG_DIR,
    LoRAConfig,
    PrefsConfig,
    RewardConfig,
    RLConfig,
    SFTConfig,
    load_config,
)
from training.rlhf.model import ModelConfig

COLOURS = ("red", "green")


@dataclass
class Inner:
    size: int = setting(4, "how big", ge=1)
    ratio: float = setting(0.5, "a share", gt=0, le=1)

    def __post_init__(self) -> None:
        if self.size == 13:
            raise ConfigError("size 13 is unlucky")


@dataclass
class Outer:
    name: str = setting(help="required: no default")
    colour: str = setting("red", "paint", choices=COLOURS)
    shape: Literal["round", "square"] = "round"
    dims: list[int] = setting([1, 2], "layer sizes", ge=1, length=(1, None))
    limits: dict[str, float] = setting({}, "per colour", choices=COLOURS, noun="colour")
    maybe: float | None = setting(None, "optional", ge=0)
    flag: bool = setting(False, "on or off")
    inner: Inner = field(default_factory=Inner)
    inners: dict[str, Inner] = setting({}, "named inners")


def _yaml(tmp_path, text: str):
    path = tmp_path / "outer.yaml"
    path.write_text(text)
    return path


def _refused(tmp_path, text: str, overrides: dict | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        load_dataclass(Outer, _yaml(tmp_path, text), overrides)
    assert "\n" not in str(e.value)
    return str(e.value)


# ------------------------------------------------------------------------------------------------ the loader
def test_loads_types_nested_and_defaults(tmp_path):
    path = _yaml(tmp_path, "name: a\ndims: [3]\nmaybe: 1e-3\ninner: {size: 7}\ninners: {x: {ratio: 1}}\n")
    cfg = load_dataclass(Outer, path)
    assert cfg.name == "a" and cfg.dims == [3] and cfg.colour == "red"
    assert cfg.maybe == 0.001  # YAML 1.1 reads 1e-3 as a string: a float field takes it as the number
    assert cfg.inner == Inner(size=7, ratio=0.5)  # nested: loaded recursively, missing keys take defaults
    assert cfg.inners == {"x": Inner(size=4, ratio=1.0)} and isinstance(cfg.inners["x"].ratio, float)
    first, second = load_dataclass(Outer, {"name": "b"}), load_dataclass(Outer, {"name": "b"})
    assert first.dims == [1, 2] and first.dims is not second.dims  # a list default is copied per instance


def test_overrides_go_on_top_and_merge_nested_mappings(tmp_path):
    path = _yaml(tmp_path, "name: a\ninner: {size: 7, ratio: 0.25}\n")
    cfg = load_dataclass(Outer, path, {"colour": "green", "inner": {"size": 9}})
    assert cfg.colour == "green" and cfg.inner == Inner(size=9, ratio=0.25)  # the file's ratio stays
    assert load_dataclass(Outer, path, {"inner": Inner(size=2)}).inner == Inner(size=2)  # an instance replaces it


def test_unknown_key_names_the_file_and_what_is_allowed(tmp_path):
    msg = _refused(tmp_path, "name: a\ncolor: red\n")
    assert msg.startswith(f"{tmp_path / 'outer.yaml'}: unknown key(s) color (did you mean colour?)")
    assert "Outer takes name, colour, shape" in msg
    msg = _refused(tmp_path, "name: a\ninner: {sise: 2}\n")
    assert "unknown key(s) sise in inner" in msg and "Inner takes size, ratio" in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: 3", "name must be a string, got 3"),
        ("name: a\ndims: 3", "dims must be a list of integers, got 3"),
        ("name: a\ndims: [1, two]", "dims[1] must be an integer, got 'two'"),
        ("name: a\ndims: [1.5]", "dims[0] must be an integer, got 1.5"),
        ("name: a\nflag: 1", "flag must be true or false, got 1"),
        ("name: a\nmaybe: fast", "maybe must be a number, got 'fast'"),
        ("name: a\nmaybe: .nan", "maybe must be a finite number, got nan"),
        ("name: a\ninner: 3", "inner must be a mapping of Inner fields, got 3"),
        ("name: a\ninner: {size: true}", "inner.size must be an integer, got True"),
        ("name: a\nlimits: [1]", "limits must be a mapping of strings to numbers, got [1]"),
    ],
)
def test_wrong_types_name_the_field(tmp_path, text, expected):
    msg = _refused(tmp_path, text)
    assert msg.startswith(str(tmp_path / "outer.yaml")) and expected in msg, msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: a\ncolour: blue", "colour must be one of red, green, got 'blue' (paint)"),
        ("name: a\nshape: oval", "shape must be one of round, square, got 'oval'"),
        ("name: a\nlimits: {red: 1, blue: 2}", "limits keys must be among red, green: unknown colour(s) blue"),
    ],
)
def test_choices(tmp_path, text, expected):
    assert expected in _refused(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: a\ndims: [0]", "dims must be a positive integer, got 0 (layer sizes)"),
        ("name: a\ndims: []", "dims must have at least 1 item(s), got []"),
        ("name: a\nmaybe: -1", "maybe must be a non-negative number, got -1.0"),
        ("name: a\ninner: {ratio: 1.5}", "inner.ratio must be in (0, 1], got 1.5 (a share)"),
        ("name: a\ninners: {x: {ratio: 0}}", "inners.x.ratio must be in (0, 1], got 0.0"),
    ],
)
def test_ranges(tmp_path, text, expected):
    assert expected in _refused(tmp_path, text)


def test_missing_keys_and_cross_field_checks_are_named(tmp_path):
    assert "missing key(s) name" in _refused(tmp_path, "colour: red\n")
    assert _refused(tmp_path, "name: a\ninner: {size: 13}\n").endswith("outer.yaml: inner: size 13 is unlucky")


@dataclass
class Named:
    label: str = setting("a", "a label", length=(1, None))
    parts: tuple[str, ...] = setting((), "part names", unique=True)
    gain: float | tuple[float, ...] = setting(1.0, "one for all parts or one each", ge=0)
    sizes: dict[str, int] = setting({"a": 1}, "part -> size", length=(1, None))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"label": ""}, "label must have at least 1 character(s), got '' (a label)"),
        ({"parts": ["a", "b", "a", "a"]}, "parts items must be distinct: a repeated (part names)"),
        ({"gain": "x"}, "gain must be a number or a list of numbers, got 'x'"),
        ({"gain": [1, "x"]}, "gain[1] must be a number, got 'x'"),  # a list: the list's own message
        ({"gain": [1, -1]}, "gain must be a non-negative number, got -1.0 (one for all parts or one each)"),
        ({"parts": "a"}, "parts must be a list of strings, got 'a'"),
        ({"sizes": {}}, "sizes must have at least 1 item(s), got {} (part -> size)"),
    ],
)
def test_string_and_mapping_length_distinct_items_and_a_number_or_a_list(values, expected):
    with pytest.raises(ConfigError) as e:
        load_dataclass(Named, values, name="n.yaml")
    assert str(e.value) == f"n.yaml: {expected}"
    assert load_dataclass(Named, {"gain": [1, 2], "parts": ["a", "b"]}) == Named("a", ("a", "b"), (1.0, 2.0))
    assert load_dataclass(Named, {"gain": 2}).gain == 2.0


def test_values_that_are_no_mapping_are_refused_naming_where():
    with pytest.raises(ConfigError, match=r"^t.yaml: ranges must be a mapping of Named fields, got \[1\]$"):
        check_values(Named, [1], name="t.yaml: ranges")


def test_allowed_says_what_the_loader_takes():
    assert allowed(Named, "gain") == "a number or a list of numbers, >= 0"
    assert allowed(Named, "parts") == "a list of strings, distinct"
    assert allowed(Named, "label") == "a string, at least 1 character(s)"
    assert allowed(Outer, "colour") == "one of red, green"
    assert allowed(Outer, "dims") == "a list of integers, >= 1, at least 1 item(s)"
    assert allowed(Inner, "ratio") == "a number, > 0 and <= 1"


def test_a_bad_override_is_named_as_one(tmp_path):
    msg = _refused(tmp_path, "name: a\n", {"dims": [0]})
    assert msg.startswith("Outer: dims must be a positive integer")  # not the file's fault
    msg = _refused(tmp_path, "name: a\n", {"inner": {"size": 13}})  # a check of several fields: both sources
    assert msg == f"{tmp_path / 'outer.yaml'} with overrides: inner: size 13 is unlucky"


def test_file_errors_are_the_same_error(tmp_path):
    with pytest.raises(ConfigError, match="config file .*none.yaml does not exist"):
        load_dataclass(Outer, tmp_path / "none.yaml")
    assert "not valid YAML" in _refused(tmp_path, "name: [a\n")
    assert "expected a mapping of Outer fields" in _refused(tmp_path, "- a\n")
    # YAML itself keeps the last of two equal keys: an edit to the first would do nothing, so it is refused
    assert _refused(tmp_path, "name: a\ninner:\n  size: 2\n  size: 3\n").endswith(
        "outer.yaml: 'size' is given twice in one mapping (line 4)"
    )


def test_a_package_error_class_is_raised_as_given(tmp_path):
    with pytest.raises(training_errors.CheckpointError, match="colour must be one of"):
        load_dataclass(Outer, {"name": "a", "colour": "blue"}, error=training_errors.CheckpointError)
    assert check_values(Outer, {"maybe": "2e-1"}, name="partial") == {"maybe": 0.2}
    with pytest.raises(ConfigError, match="partial: unknown key"):
        check_values(Outer, {"nope": 1}, name="partial")


def test_one_config_error_class_for_every_package():
    """training.errors.ConfigError is edge's, so an except of either name catches a training config's refusal."""
    assert training_errors.ConfigError is ConfigError
    with pytest.raises(ConfigError, match="PPO config: expected a mapping"):
        PPOConfig.from_dict([])


# odd things a person writes in YAML: each must load as the field's type or fail as one ConfigError naming the
# file and the field, never anything else (a TypeError deep in a trainer, a config that loads a string as a number)
ODD_YAML = [
    "null", "yes", "no", "0", "-1", "1", "2", "1e400", ".nan", "-.inf", "1e-3", "0.5", "'3'", "0x1F", "2024-01-01",
    "[]", "[1, a]", "[0.1, 0.2, 0.3]", "{}", "{a: 1}", "{vx: .1}", "é", "''", "[[1]]", "{tracking_error_lin: {}}",
]  # fmt: skip
CONFIGS = [
    (PPOConfig, {}),
    (SFTConfig, {}),
    (PrefsConfig, {}),
    (RewardConfig, {}),
    (RLConfig, {}),
    (ModelConfig, {}),
    (TriggerPolicy, {}),
    (RetrainConfig, {}),
    (SweepSpec, {"robot": "rover", "search": {"gamma": {"grid": [0.9]}}}),
    (RobotConfig, yaml.safe_load(config_path("robots", "rover.yaml").read_text())),
]


@pytest.mark.parametrize(("cls", "base"), CONFIGS, ids=[c.__name__ for c, _ in CONFIGS])
def test_odd_yaml_values_load_typed_or_fail_naming_the_field(tmp_path, cls, base):
    path = tmp_path / "odd.yaml"
    rng = random.Random(0)
    for f in dataclasses.fields(cls):
        for text in rng.sample(ODD_YAML, 12):
            path.write_text((yaml.safe_dump(base) if base else "") + f"{f.name}: {text}\n")
            try:
                cfg = load_dataclass(cls, path, error=training_errors.ConfigError)
            except training_errors.ConfigError as e:
                assert str(e).startswith(str(path)) and f.name in str(e), (f.name, text, str(e))
                continue
            # what loaded is what the annotations say: it loads again, unchanged, from its own fields
            assert load_dataclass(cls, dataclasses.asdict(cfg), error=training_errors.ConfigError) == cfg


def test_every_shipped_config_loads():
    for robot in ("rover", "quadruped"):
        assert PPOConfig.for_robot(robot).robot == robot
    for cls, stage in ((SFTConfig, "sft"), (PrefsConfig, "prefs"), (RewardConfig, "reward"), (RLConfig, "rl")):
        assert isinstance(load_config(cls, RLHF_CONFIG_DIR / f"{stage}.yaml"), cls)
    retrain = RetrainConfig.from_yaml()
    assert set(retrain.budgets) == {"minimal", "quick", "full"} and retrain.budget("quick").name == "quick"
    assert retrain.budget("minimal").sysid.windows == 16
    assert TriggerPolicy.from_yaml().kpis["falls"].ratio == 1.0
    assert SweepSpec.from_yaml(config_path("sweeps", "rover_ppo.yaml")).search["gamma"] == {"grid": [0.95, 0.99]}


# ------------------------------------------------------------------------------------------ project configs
def test_rl_group_of_one_is_refused_with_the_reason(tmp_path):
    rl = tmp_path / "rl.yaml"
    rl.write_text("samples_per_prompt: 1\n")
    with pytest.raises(training_errors.ConfigError) as e:
        load_config(RLConfig, rl)
    assert str(e.value).startswith(f"{rl}: samples_per_prompt must be an integer >= 2, got 1 (GRPO group size")
    with pytest.raises(training_errors.ConfigError, match="RLConfig: samples_per_prompt must be an integer >= 2"):
        load_config(RLConfig, RLHF_CONFIG_DIR / "rl.yaml", samples_per_prompt=1)


def test_sft_model_size_is_checked_at_load(tmp_path):
    sft = tmp_path / "sft.yaml"
    sft.write_text("model: {hidden_size: 96}\n")
    with pytest.raises(training_errors.ConfigError, match=r"sft.yaml: model: hidden_size / num_heads must be one of"):
        load_config(SFTConfig, sft)


def test_retrain_budgets_check_their_ppo_overrides(tmp_path):
    budget = tmp_path / "tiny.yaml"
    budget.write_text("sysid: {windows: 2}\nfinetune: {iterations: 0}\n")
    with pytest.raises(training_errors.ConfigError, match="tiny.yaml: finetune: iterations must be a positive"):
        RetrainConfig.from_yaml().budget(budget)
    budget.write_text("sysid: {windows: 2, population: 4}\nfinetune: {iterations: 8}\n")
    plan = RetrainConfig.from_yaml().budget(budget)
    sizes = (plan.sysid.windows, plan.sysid.population, plan.sysid.runs)
    assert (plan.name, *sizes, plan.finetune) == ("tiny", 2, 4, 1, {"iterations": 8})
    bad = tmp_path / "retrain.yaml"
    bad.write_text("centre: {gravity: {relative: 0.1}}\npromotion: {kpis: [speed]}\n")
    with pytest.raises(training_errors.ConfigError, match="centre keys must be among .*unknown twin parameter"):
        RetrainConfig.from_yaml(bad)
    bad.write_text("promotion: {kpis: [speed]}\n")
    with pytest.raises(
        training_errors.ConfigError, match=r"promotion.kpis items must be among .*unknown KPI\(s\) speed"
    ):
        RetrainConfig.from_yaml(bad)


# ----------------------------------------------------------------------------------------------------- flags
def _parser(cls, fields=None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_flags(p, cls, fields, defaults_from="x.yaml")
    return p


def test_flags_come_from_the_fields():
    p = _parser(Outer)
    args = p.parse_args(["--colour", "green", "--dims", "3", "4", "--flag", "--inner-size", "2"])
    assert flag_values(args, Outer) == {"colour": "green", "dims": [3, 4], "flag": True, "inner": {"size": 2}}
    assert flag_values(p.parse_args([]), Outer) == {}  # a flag not given overrides nothing
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--colour", "blue"])  # choices from the field
    text = p.format_help()
    assert "paint (built-in default red)" in text and "x.yaml" in text
    assert "--limits" not in text and "--inners" not in text  # mappings are set in the YAML file
    assert [a.dest for a in _parser(PPOConfig, {"num_envs": "--envs"})._actions[1:]] == ["num_envs"]


def _actions(argv: list[str]) -> dict[str, argparse.Action]:
    """The actions of one (sub)command of `sim2real`, by dest."""
    parser = cli.build_parser()
    for name in argv:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {a.dest: a for a in parser._actions}


def _same_as_field(action: argparse.Action, f: dataclasses.Field) -> None:
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    assert action.default is None, f.name  # the YAML's value stands unless the flag is given
    assert list(action.choices or []) == list(f.metadata.get("choices", [])), f.name
    shown = str(default).lower() if isinstance(default, bool) or default is None else str(default)
    if isinstance(default, (tuple, list)):  # a list flag takes (and shows) its items space-separated
        shown = " ".join(map(str, default))
    assert f"built-in default {'none' if default is None else shown}" in action.help, (f.name, action.help)


def test_train_flags_are_ppo_config_fields():
    fields = {f.name: f for f in dataclasses.fields(PPOConfig)}
    actions = _actions(["train"])
    assert set(actions) - set(fields) == {"help", "max_minutes", "resume", "config", "sweep"}
    for dest in set(actions) & set(fields) - {"robot"}:  # --robot also picks config/ppo/<robot>.yaml
        _same_as_field(actions[dest], fields[dest])
    assert actions["num_envs"].option_strings == ["--envs"] and actions["num_envs"].type is int


@pytest.mark.parametrize(
    ("stage", "cls"), [("sft", SFTConfig), ("prefs", PrefsConfig), ("reward", RewardConfig), ("rl", RLConfig)]
)
def test_rlhf_stage_flags_are_its_config_fields(stage, cls):
    actions = _actions(["rlhf", stage])
    nested = {"model": ModelConfig, "lora": LoRAConfig} if cls is SFTConfig else {}
    for f in dataclasses.fields(cls):
        if f.name in nested:
            for g in dataclasses.fields(nested[f.name]):
                _same_as_field(actions[f"{f.name}.{g.name}"], g)
        else:
            _same_as_field(actions[f.name], f)


def test_rlhf_flags_go_over_the_stage_yaml(capsys):
    from sim2real.cli import rlhf

    parser = cli.build_parser()
    args = parser.parse_args(["rlhf", "rl", "--samples-per-prompt", "8", "--engine", "transformers"])
    config = rlhf._config(args, RLConfig, "rl")
    yaml_values = load_config(RLConfig, RLHF_CONFIG_DIR / "rl.yaml")
    assert config == dataclasses.replace(yaml_values, samples_per_prompt=8, engine="transformers")
    args = parser.parse_args(["rlhf", "sft", "--model-num-layers", "3"])
    model = rlhf._config(args, SFTConfig, "sft").model
    assert model == dataclasses.replace(load_config(SFTConfig, RLHF_CONFIG_DIR / "sft.yaml").model, num_layers=3)
    assert cli.main(["rlhf", "rl", "--samples-per-prompt", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sim2real rlhf: error: RLConfig: samples_per_prompt must be an integer >= 2") and (
        "\n" not in err
    )


def test_choice_lists_are_the_one_constants():
    from edge.instruct.onnx_generator import BACKENDS as ONNX_BACKENDS
    from edge.runtime import BACKENDS as INFERENCE_BACKENDS
    from sim.backends import BACKENDS as TWIN_BACKENDS

    assert list(_actions(["validate"])["backend"].choices) == list(TWIN_BACKENDS)
    assert list(_actions(["sil"])["backend"].choices) == list(INFERENCE_BACKENDS)
    assert list(_actions(["sil"])["instruction_backend"].choices) == list(ONNX_BACKENDS)
    assert list(_actions(["rlhf", "eval"])["backend"].choices) == list(INSTRUCTION_BACKENDS)
    assert list(_actions(["rlhf", "rl"])["engine"].choices) == list(ENGINES)
    assert list(_actions(["rlhf", "pipeline"])["engine"].choices) == list(ENGINES)
    assert list(_actions(["loop"])["rlhf_engine"].choices) == list(ENGINES)
