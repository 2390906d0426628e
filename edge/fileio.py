"""Hashing and atomic writes for artifact files (a reader sees the old file or the new one, never half of one), and
the one reader of YAML config files (a missing, malformed or non-mapping file is one clear error)."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Hashable
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` through a temporary file in the same directory and os.replace. `mode`: the file's
    permissions (0o644: the artifact is read by other users, ROS nodes and CI; a private key passes 0o600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the rename must not land before the bytes do (power loss on the robot)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _DuplicateKey(Exception):
    pass


@functools.cache
def _unique_key_loader():
    """yaml.SafeLoader that refuses a key given twice in one mapping (built once, on the first read: yaml loads
    lazily)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor`: keys given beside it override the merged ones, as they should
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, Hashable):
                    continue  # SafeLoader itself refuses it, with its own message
                if key in seen:
                    raise _DuplicateKey(f"{key!r} is given twice in one mapping (line {key_node.start_mark.line + 1})")
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def read_yaml_mapping(path: str | Path, error: type[Exception], missing: str, not_mapping: str) -> dict:
    """The YAML mapping in `path` ({} for an empty file). `error` is raised, naming the file, when it is missing
    (f"{missing} {path} does not exist"), is not YAML, gives a key twice in one mapping (YAML keeps the last one
    silently, so an edit to the first would do nothing), or does not hold a mapping (f"{path}: {not_mapping}")."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise error(f"{missing} {path} does not exist")
    try:
        raw = yaml.load(path.read_text(), Loader=_unique_key_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        raise error(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML ({e.__class__.__name__})") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise error(f"{path}: {not_mapping}")
    return raw
