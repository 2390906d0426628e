"""Where the package's installed files are: configs, launch files and robot assets.

The ROS 2 package `edge` installs them under `<prefix>/share/edge/` (colcon into install/, pip into the venv's
sys.prefix). Lookup order: the ament index (AMENT_PREFIX_PATH, as `ros2 launch` and FindPackageShare use), then
sys.prefix, then the checkout an editable install points into (a development machine, where the repository is
the package's share directory).
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path

PACKAGE = "edge"


@cache
def share_dir() -> Path:
    """The first `share/edge` that holds the package's config directory."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p] + [sys.prefix]
    candidates = [Path(p) / "share" / PACKAGE for p in prefixes]
    candidates.append(Path(__file__).resolve().parents[1])  # editable install: the checkout itself
    for c in candidates:
        if (c / "config").is_dir():
            return c
    raise FileNotFoundError(
        f"the {PACKAGE} package's share directory (config/, launch/) was not found in "
        + ", ".join(str(c) for c in candidates)
    )


def config_path(*parts: str) -> Path:
    """A path under the package's config directory, e.g. config_path("robots", "rover.yaml")."""
    return share_dir().joinpath("config", *parts)
