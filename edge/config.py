"""The one validating loader of typed config dataclasses, and the command-line flags generated from their fields.

A config is a dataclass whose fields say what they take (in the spirit of TRL's HfArgumentParser): the annotation
gives the type (`typing.Literal` for a fixed set of strings), and `setting(...)` puts the help text, the allowed
choices and the numeric range into `dataclasses.field(metadata=...)`:

    @dataclass
    class RLConfig:
        engine: str = setting("vllm", "what generates the samples", choices=ENGINES)
        samples_per_prompt: int = setting(4, "GRPO group size", ge=2)
        model: ModelConfig = field(default_factory=ModelConfig)   # nested: loaded recursively

`load_dataclass(RLConfig, "rl.yaml", {"seed": 3})` reads the file (edge.fileio.read_yaml_mapping), puts the
overrides on top (a nested dataclass's mapping is merged key by key) and refuses unknown keys, missing required
ones, wrong types, values outside the choices or ranges with one error whose message names the file, the field
and what is allowed, e.g. `rl.yaml: samples_per_prompt must be an integer >= 2, got 1 (GRPO group size)`.
Checks that tie several fields together stay in the dataclass's `__post_init__`; the loader names the file in
front of what they raise. `add_flags` / `flag_values` give a CLI one flag per field without re-typing its
defaults, help or choices.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import functools
import math
import numbers
import os
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from edge.errors import ConfigError, UserFixableError
from edge.fileio import read_yaml_mapping
from edge.resources import share_dir

__all__ = ["add_flags", "allowed", "check_values", "flag_values", "load_dataclass", "setting"]

T = TypeVar("T")
_RANGE_KEYS = ("ge", "gt", "le", "lt")


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    choices: Iterable | None = None,
    noun: str | None = None,
    length: int | tuple[int, int | None] | None = None,
    unique: bool = False,
    **bounds: float | None,
) -> Any:
    """A dataclass field with its help text and limits in its metadata. `choices` restrict a scalar, each item of
    a list, or each key of a mapping (`noun` names them in messages: "unknown KPI(s) ..."); the bounds ge, gt, le
    and lt bound every number of the value (None: no bound); `length` is a list's, a mapping's or a string's
    exact length or (min, max) with max None for no limit (`length=(1, None)`: not empty); `unique` refuses a
    list that repeats an item. A list or dict default is copied for each instance."""
    unknown = set(bounds) - set(_RANGE_KEYS)
    if unknown:
        raise TypeError(
            f"setting() got unknown bound(s) {', '.join(sorted(unknown))}; bounds: {', '.join(_RANGE_KEYS)}"
        )
    meta: dict[str, Any] = {"help": help}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if noun is not None:
        meta["noun"] = noun
    meta.update({key: bound for key, bound in bounds.items() if bound is not None})
    if length is not None:
        meta["length"] = (length, length) if isinstance(length, int) else length
    if unique:
        meta["unique"] = True
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# ---------------------------------------------------------------------------------------------------- loading
class _Refused(Exception):
    """A value the loader refuses; the message names the field, the caller adds the file."""


def load_dataclass(
    cls: type[T],
    source: str | Path | Mapping | None = None,
    overrides: Mapping | None = None,
    *,
    error: type[UserFixableError] = ConfigError,
    name: str | None = None,
    what: str = "config file",
) -> T:
    """`cls` from a YAML file (a path), a mapping or nothing (the defaults), with `overrides` on top. Anything
    refused raises `error` naming the source: the file (or `name`) for its values, `cls.__name__` for a bad
    override, "<file> with overrides" for a check of several fields. `what` names a missing file ("PPO config
    x.yaml does not exist")."""
    if source is None or isinstance(source, Mapping):
        values, name = dict(source or {}), name or cls.__name__
    else:
        values = read_yaml_mapping(source, error, what, f"expected a mapping of {cls.__name__} fields")
        name = name or str(source)
    overrides = dict(overrides or {})
    check_values(cls, values, name=name, error=error)  # each value named by where it came from
    check_values(cls, overrides, name=cls.__name__, error=error)
    try:  # what is left: missing keys and the checks that tie fields together
        return _fields(cls, _merge(cls, values, overrides), "", partial=False)
    except _Refused as e:
        raise error(f"{name}{' with overrides' if overrides else ''}: {e}") from None


def check_values(
    cls: type, values: object, *, name: str, error: type[UserFixableError] = ConfigError
) -> dict[str, Any]:
    """Some of `cls`'s fields (e.g. overrides kept for later) checked as the loader checks them; returns them
    converted (a YAML "1e-3" as a float, lists as the field's container type). `values` that are no mapping are
    refused as such."""
    if not isinstance(values, Mapping):
        raise error(f"{name} must be a mapping of {cls.__name__} fields, got {values!r}")
    try:
        return _fields(cls, dict(values), "", partial=True)
    except _Refused as e:
        raise error(f"{name}: {e}") from None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _merge(cls: type, base: dict, top: dict) -> dict:
    """`top` over `base`; a nested dataclass's mapping is merged key by key (a partial model size on a file's)."""
    out, hints = dict(base), _hints(cls)
    for key, value in top.items():
        tp = hints.get(key)
        if _is_dataclass_type(tp) and isinstance(out.get(key), Mapping) and isinstance(value, (Mapping, tp)):
            out[key] = _merge(tp, dict(out[key]), _as_mapping(value))
        else:
            out[key] = value
    return out


def _fields(cls: type, values: dict, path: str, partial: bool) -> Any:
    """The fields of `cls` in `values` converted and checked; with partial, a dict of those given, else the
    instance (missing fields take their defaults, and the dataclass's own checks run)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    where = f" in {path}" if path else ""
    unknown = [k for k in values if k not in fields]
    if unknown:
        close = [m for k in unknown for m in difflib.get_close_matches(str(k), fields, n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise _Refused(
            f"unknown key(s) {', '.join(map(str, unknown))}{where}{hint}; {cls.__name__} takes {', '.join(fields)}"
        )
    hints = _hints(cls)
    out = {}
    for key, value in values.items():
        tp, meta, at = hints[key], fields[key].metadata, f"{path}.{key}" if path else key
        if _is_dataclass_type(tp) and isinstance(value, (Mapping, tp)):
            out[key] = _fields(tp, _as_mapping(value), at, partial)
        else:
            out[key] = _check(_convert(tp, value, at), meta, at)
    if partial:
        return out
    required = [
        k for k, f in fields.items() if dataclasses.MISSING is f.default and dataclasses.MISSING is f.default_factory
    ]
    missing = [k for k in required if k not in out]
    if missing:
        raise _Refused(f"missing key(s) {', '.join(missing)}{where}")
    try:
        return cls(**out)
    except UserFixableError as e:  # a check of several fields in __post_init__: say where
        raise _Refused(f"{path}: {e}" if path else str(e)) from None


def _convert(tp: Any, value: Any, at: str) -> Any:
    """`value` as type `tp`, or _Refused naming `at` and what the type takes."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # X | None: X's own message is the more precise one
            return _convert(options[0], value, at)
        refused = {}
        for option in options:
            try:
                return _convert(option, value, at)
            except _Refused as e:
                refused[option] = e
        lists = [o for o in options if o in (list, tuple) or typing.get_origin(o) in (list, tuple)]
        if isinstance(value, (list, tuple)) and len(lists) == 1:  # float | list[float]: the list's item named
            raise refused[lists[0]]
        raise _wrong(tp, value, at)
    if origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Refused(f"{at} must be one of {', '.join(map(str, args))}, got {value!r}")
    if _is_dataclass_type(tp):
        if isinstance(value, (Mapping, tp)):
            return _fields(tp, _as_mapping(value), at, partial=False)
        raise _wrong(tp, value, at)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(tp, value, at)
    if tp is int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        raise _wrong(tp, value, at)
    if tp is float:
        return _number(value, at)
    if tp is str:
        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
        raise _wrong(tp, value, at)
    if tp in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _wrong(tp, value, at)
        if origin is tuple and args and args[-1] is not Ellipsis:  # fixed length: tuple[float, float]
            if len(value) != len(args):
                raise _wrong(tp, value, at)
            return tuple(_convert(a, v, f"{at}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        item = args[0] if args else Any
        items = [_convert(item, v, f"{at}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin or tp) is tuple else items
    if tp is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise _wrong(tp, value, at)
        key_tp, value_tp = args or (Any, Any)
        return {_convert(key_tp, k, f"{at} key"): _convert(value_tp, v, f"{at}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _wrong(tp, value, at)


def _number(value: Any, at: str) -> float:
    """A finite float. YAML 1.1 reads 1e-3 (no dot) as a string, so a string that parses as a number counts."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise _wrong(float, value, at)
    try:
        number = float(value)
    except ValueError:
        raise _wrong(float, value, at) from None
    if not math.isfinite(number):
        raise _Refused(f"{at} must be a finite number, got {value!r}")
    return number


def _check(value: Any, meta: Mapping, at: str) -> Any:
    """The field's choices, range and length (from its metadata) on a converted value."""
    why = f" ({meta['help']})" if meta.get("help") else ""
    choices = meta.get("choices")
    if choices is not None and value is not None:
        noun = meta.get("noun", "key" if isinstance(value, Mapping) else "value")
        if isinstance(value, (Mapping, list, tuple)):
            bad = [v for v in value if v not in choices]
            if bad:
                part = "keys" if isinstance(value, Mapping) else "items"
                raise _Refused(
                    f"{at} {part} must be among {', '.join(map(str, choices))}: "
                    f"unknown {noun}(s) {', '.join(map(str, bad))}"
                )
        elif value not in choices:
            raise _Refused(f"{at} must be one of {', '.join(map(str, choices))}, got {value!r}{why}")
    if any(k in meta for k in _RANGE_KEYS):
        for number in _numbers(value):
            if not _in_range(number, meta):
                raise _Refused(f"{at} must be {_range_text(meta, isinstance(number, int))}, got {number!r}{why}")
    if "length" in meta and isinstance(value, (list, tuple, str, Mapping)):
        low, high = meta["length"]
        if len(value) < low or (high is not None and len(value) > high):
            shown = value if isinstance(value, str) else dict(value) if isinstance(value, Mapping) else list(value)
            raise _Refused(f"{at} must have {_length_text(meta, isinstance(value, str))}, got {shown!r}{why}")
    if meta.get("unique") and isinstance(value, (list, tuple)):
        repeated = [v for i, v in enumerate(value) if v in value[:i]]
        if repeated:
            once = [v for i, v in enumerate(repeated) if v not in repeated[:i]]  # items may be unhashable
            raise _Refused(f"{at} items must be distinct: {', '.join(map(str, once))} repeated{why}")
    return value


def _numbers(value: Any) -> list:
    """The numbers a range applies to: the value itself, a list's items or a mapping's values."""
    if isinstance(value, Mapping):
        value = list(value.values())
    items = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _in_range(x: float, meta: Mapping) -> bool:
    return (
        ("ge" not in meta or x >= meta["ge"])
        and ("gt" not in meta or x > meta["gt"])
        and ("le" not in meta or x <= meta["le"])
        and ("lt" not in meta or x < meta["lt"])
    )


def _range_text(meta: Mapping, integer: bool) -> str:
    """'a positive integer', 'in (0, 1]', 'a number >= 2', ..."""
    noun = "an integer" if integer else "a number"
    low = meta.get("ge", meta.get("gt"))
    high = meta.get("le", meta.get("lt"))
    if low is not None and high is not None:
        return f"in {'[' if 'ge' in meta else '('}{low:g}, {high:g}{']' if 'le' in meta else ')'}"
    if meta.get("gt") == 0 or (integer and meta.get("ge") == 1):
        return f"a positive {noun.split()[1]}"
    if meta.get("ge") == 0:
        return f"a non-negative {noun.split()[1]}"
    if low is not None:
        return f"{noun} {'>=' if 'ge' in meta else '>'} {low:g}"
    return f"{noun} {'<=' if 'le' in meta else '<'} {high:g}"


def _length_text(meta: Mapping, text: bool) -> str:
    """'at least 1 item(s)', '3 item(s)', '1 to 8 character(s)'."""
    low, high = meta["length"]
    count = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
    return f"{count} {'character(s)' if text else 'item(s)'}"


def allowed(cls: type, name: str) -> str:
    """What the loader takes for field `name` of `cls`, in words, as a reference table shows it: 'a number or a
    list of numbers, >= 0', 'one of hold, damp', 'a list of strings, at least 1 item(s), distinct'."""
    meta, tp = {f.name: f for f in dataclasses.fields(cls)}[name].metadata, _hints(cls)[name]
    words = [f"one of {', '.join(map(str, meta['choices']))}" if "choices" in meta else _kind(tp)]
    ops = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    bounds = [f"{ops[k]} {meta[k]:g}" for k in _RANGE_KEYS if k in meta]
    if bounds:
        words.append(" and ".join(bounds))
    if "length" in meta:
        words.append(_length_text(meta, tp is str))
    if meta.get("unique"):
        words.append("distinct")
    return ", ".join(words)


def _wrong(tp: Any, value: Any, at: str) -> _Refused:
    return _Refused(f"{at} must be {_kind(tp)}, got {value!r}")


def _kind(tp: Any, plural: bool = False) -> str:
    """What a type takes, in words: 'an integer', 'a list of numbers', 'a mapping of strings to numbers'."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a, plural) for a in args)
    if origin is typing.Literal:
        return ("" if plural else "one of ") + ", ".join(map(str, args))
    if origin in (list, tuple) or tp in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"{'lists' if plural else 'a list'} of {len(args)} {_kind(args[0], True)}"
        return f"{'lists' if plural else 'a list'} of {_kind(args[0], True) if args else 'values'}"
    if origin is dict or tp is dict:
        key, value = (_kind(a, True) for a in args) if args else ("keys", "values")
        return f"{'mappings' if plural else 'a mapping'} of {key} to {value}"
    if _is_dataclass_type(tp):
        return f"{'mappings' if plural else 'a mapping'} of {tp.__name__} fields"
    words = {
        bool: ("true or false", "true/false values"),
        int: ("an integer", "integers"),
        float: ("a number", "numbers"),
        str: ("a string", "strings"),
        type(None): ("null", "nulls"),
    }
    if tp in words:
        return words[tp][plural]
    return getattr(tp, "__name__", str(tp))


def _is_dataclass_type(tp: Any) -> TypeGuard[type]:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _as_mapping(value: Any) -> dict:
    """A mapping, or a dataclass instance's init fields, as a dict (the callers pass one or the other)."""
    if isinstance(value, Mapping):
        return dict(value)
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}


# ---------------------------------------------------------------------------------------------- command line
def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    fields: Mapping[str, str | None] | Iterable[str] | None = None,
    *,
    defaults_from: str | None = None,
    _prefix: str = "",
) -> None:
    """One flag per field of `cls` (all that a flag can express, or those named in `fields`, which may map a
    field to its flag: {"num_envs": "--envs"}). The help, type and choices come from the field; the default is
    None, so a flag not given overrides nothing (`flag_values`). A field without a default is a required flag
    unless `defaults_from` names where the values of flags not given come from (a YAML file): the parser's
    description says so once, and each help shows the built-in default. A bool field is --x / --no-x; a list
    field takes its items space-separated (none at all when its default is empty). `parser` may be an argument
    group. A nested dataclass field gets one flag per field of its own: --model-hidden-size."""
    names = dict(fields) if isinstance(fields, Mapping) else dict.fromkeys(fields) if fields is not None else None
    if defaults_from and not _prefix:
        note = f"Flags not given take their values from {defaults_from}, else the built-in defaults shown."
        parser.description = f"{parser.description}\n{note}" if parser.description else note
    hints = _hints(cls)
    if names is not None and set(names) - set(hints):
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(sorted(set(names) - set(hints)))}")
    for f in dataclasses.fields(cls):
        if not f.init or (names is not None and f.name not in names):
            continue
        dest, tp = _prefix + f.name, hints[f.name]
        if _is_dataclass_type(tp):
            add_flags(parser, tp, defaults_from=defaults_from, _prefix=dest + ".")
            continue
        default = _default(f)
        kwargs = _flag_kwargs(tp, f.metadata, empty_list=isinstance(default, (list, tuple)) and not default)
        if kwargs is None:
            if names is not None:
                raise TypeError(f"{cls.__name__}.{f.name} ({tp}) cannot be a command-line flag")
            continue  # a mapping: set it in the YAML file
        flag = (names or {}).get(f.name) or "--" + dest.replace(".", "-").replace("_", "-")
        help = _flag_help(f, "built-in default" if defaults_from else "default")
        if "choices" not in kwargs and "action" not in kwargs:  # argparse shows choices as {a,b} by itself
            kwargs["metavar"] = f.name.upper()
        if default is dataclasses.MISSING and not defaults_from:
            kwargs["required"] = True
        parser.add_argument(flag, dest=dest, default=None, help=help, **kwargs)


def flag_values(
    args: argparse.Namespace,
    cls: type,
    fields: Mapping[str, str | None] | Iterable[str] | None = None,
    _prefix: str = "",
) -> dict[str, Any]:
    """The fields of `cls` given as flags (`add_flags` with the same `fields`), as overrides: {field: value},
    nested for a nested dataclass ({"model": {"hidden_size": 256}})."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if fields is not None and f.name not in fields:
            continue
        dest, tp = _prefix + f.name, _hints(cls)[f.name]
        if _is_dataclass_type(tp):
            nested = flag_values(args, tp, None, dest + ".")
            if nested:
                out[f.name] = nested
        elif getattr(args, dest, None) is not None:
            out[f.name] = getattr(args, dest)
    return out


_SCALARS = (int, float, str, Path)


def _flag_kwargs(tp: Any, meta: Mapping, empty_list: bool = False) -> dict | None:
    """add_argument's type/choices/nargs/action for a field type; None for a type no flag can express. A path
    typed `str | Path` is a string; a list whose default is empty (`empty_list`) may be given with no items."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if len(args) > 1 and set(args) <= {str, Path}:
            args = [str]
        return _flag_kwargs(args[0], meta, empty_list) if len(args) == 1 else None
    if tp is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(tp) is typing.Literal:
        return {"type": type(args[0]), "choices": list(args)}
    if tp in _SCALARS:
        return {"type": tp, **({"choices": list(meta["choices"])} if "choices" in meta else {})}
    if typing.get_origin(tp) in (list, tuple) and args and args[0] in _SCALARS:
        fixed = typing.get_origin(tp) is tuple and args[-1] is not Ellipsis
        return {"type": args[0], "nargs": len(args) if fixed else "*" if empty_list else "+"}
    return None


def _default(f: dataclasses.Field) -> Any:
    """A field's default (a fresh one from its factory), or dataclasses.MISSING."""
    return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


def _flag_help(f: dataclasses.Field, label: str) -> str:
    default = _default(f)
    text = f.metadata.get("help", "")
    if default is not dataclasses.MISSING:
        text += f" ({label} {_show(default)})"
    return text.strip().replace("%", "%%")  # argparse %-formats help strings


def _show(value: Any) -> str:
    """A default as a flag's help shows it: a list as its items, a file of the package as config/... ."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(map(_show, value))
    if isinstance(value, (str, os.PathLike)) and os.path.isabs(value):
        return _in_share(Path(value))
    return str(value) if value != "" else "''"


def _in_share(path: Path) -> str:
    """`path` relative to the package's share directory (config/sil/...) when it lies there, as the docs name it."""
    try:
        return str(path.relative_to(share_dir()))
    except (ValueError, FileNotFoundError):
        return str(path)
