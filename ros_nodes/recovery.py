"""Recovery of the segments a killed field_recorder left under `.partial/`: what it wrote up to its last complete
chunk is rewritten into a finalised segment named `<name>-recovered`, then the partial directory goes.

Crash-safe itself: the recovered segment is built in `.partial/<name>.recovering/` and renamed into place in one
step; a partial whose `-recovered` segment already exists is only removed (a crash between the rename and the
removal must not ingest its messages twice). No ROS imports: the recorder calls it at start, tests call it directly.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mcap.reader import NonSeekingReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

PARTIAL = ".partial"
RECOVERED_SUFFIX = "-recovered"
_BUILDING = ".recovering"


@dataclass
class Recovered:
    segment: Path  # the finalised segment (or where it would have gone when nothing was readable)
    messages: int
    damage: str  # why reading stopped ("" when the file ended cleanly)


def recover_partial_segments(output_dir: str | Path) -> list[Recovered]:
    """Recover every leftover partial segment under output_dir/.partial; returns what each one kept."""
    partial_root = Path(output_dir) / PARTIAL
    if not partial_root.is_dir():
        return []
    for leftover in partial_root.glob(f"*{_BUILDING}"):  # an earlier recovery died midway: build it again
        shutil.rmtree(leftover)
    results = []
    for partial in sorted(p for p in partial_root.iterdir() if p.is_dir()):
        final = Path(output_dir) / f"{partial.name}{RECOVERED_SUFFIX}"
        if not final.exists():
            results.append(_recover(partial, final))
        shutil.rmtree(partial)
    return results


def _recover(partial: Path, final: Path) -> Recovered:
    building = partial.with_name(partial.name + _BUILDING)
    typestore = get_typestore(Stores.ROS2_JAZZY)
    count, damage = 0, ""
    writer = Writer(building, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    connections: dict[int, object] = {}
    try:
        for mcap in sorted(partial.glob("*.mcap")):
            with open(mcap, "rb") as f:
                try:
                    for schema, channel, message in NonSeekingReader(f).iter_messages(log_time_order=False):
                        if channel.id not in connections:
                            connections[channel.id] = writer.add_connection(
                                channel.topic, schema.name, typestore=typestore
                            )
                        writer.write(connections[channel.id], message.log_time, message.data)
                        count += 1
                except Exception as e:  # noqa: BLE001 - a truncated record fails in struct or mcap code alike
                    damage = f"{mcap.name}: unreadable from byte {f.tell()} ({e.__class__.__name__})"
    finally:
        writer.close()
    if count:
        os.replace(building, final)
    else:
        shutil.rmtree(building)
    return Recovered(final, count, damage)
