"""The quiet console: `sim2real rlhf pipeline`, run as a user runs it (a subprocess), redoes RL with vLLM, the
evaluation and the export from a copy of the session's minimal run; what vLLM, transformers and torch log goes to
the run's libraries.log, and none of it (nor their progress bars) reaches stdout or stderr; the pipeline's own plain
progress lines do."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from sim2real.library_logs import LOG_FILE
from tests.rlhf_helpers import minimal_run

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$")  # library_logs' format


def test_library_logging_goes_to_the_run_log_not_the_console(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(
        Path(minimal_run()["model_dir"]).parent,
        run,
        ignore=shutil.ignore_patterns("rl", "eval", "onnx", "rlhf.json", "stages.log", LOG_FILE),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "TRANSFORMERS_", "SIM2REAL_DEBUG"))}
    done = subprocess.run(
        [sys.executable, "-m", "sim2real", "rlhf", "pipeline", "--out", str(run), "--budget", "minimal"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    console = done.stdout + done.stderr
    logged = [m.groups() for m in map(LINE.match, (run / LOG_FILE).read_text().splitlines()) if m]
    assert any(name.startswith("vllm") for _, name, _ in logged)  # the engine's start-up, weight reloads
    messages = {message.strip() for _, _, message in logged if len(message.strip()) > 12}
    leaked = [
        line for line in console.splitlines() if line.strip() in messages or re.match(r"^(INFO|WARNING) \d", line)
    ]
    assert not leaked, leaked[:5]
    assert "Failed to load weights" not in console and "Traceback" not in console
    assert "Loading safetensors checkpoint shards" not in console  # vLLM's bar at every weight sync
    for bar in ("Writing model shards", "Loading weights"):  # transformers' bars at every save and load
        assert bar not in console
    # without a terminal the pipeline's bar draws nothing until the end: a plain line per stage says where it is
    assert [m.group(1) for m in re.finditer(r"^RLHF +\d+% (\w+): ", done.stdout, re.M)][:4] == [
        "sft",
        "prefs",
        "reward",
        "rl",
    ]
