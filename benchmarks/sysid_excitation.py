"""What an identification manoeuvre lets system identification determine: the rover driven by its hand-written
controller through the operator's driving script (config/sil/default_commands.yaml: the anchor, measured in the
same run) and through the identification manoeuvre (config/sil/identification_commands.yaml: steps and chirps),
for the same time, on the easy field robot (config/retrain/field_twin.yaml with a robot's sensor noise) and the hard
one (config/retrain/field_robot_hard.yaml). Each log is identified for payload, motor strength, kd scale, delay and lag
(training.retrain.sysid), after its gyro bias, identified against the odometry (training.retrain.calibration), is
taken off, as the retraining does; printed: the gyro bias, each parameter's value, 95% interval and whether the log
determines it, the trajectory errors, and which parameters the manoeuvre determines that the driving script does
not.

The logs are recorded in-process (training.retrain.field_drive), not over ROS 2: the question is what the
commands excite, not the transport.

    python -m benchmarks.sysid_excitation [--seconds 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from edge.resources import config_path
from sim.controllers import DiffDriveController
from sim.field_robot import FieldEffects, FieldRobot, FieldRobotConfig, load_field_robot
from sim.randomization import NOMINAL, RandomizationConfig
from sim.twin import BatchedTwin
from sim2real.sil.scripts import command_at, load_commands
from training.retrain.calibration import gyro_bias
from training.retrain.config import Budget, RetrainConfig
from training.retrain.field_drive import drive_field_log
from training.retrain.sysid import SysIdConfig, identify, log_windows

SCRIPTS = {"driving": "default_commands.yaml", "manoeuvre": "identification_commands.yaml"}
PARAMS = ("payload_kg", "motor_strength", "kd_scale", "latency_s", "motor_lag_s")
# the easy field twin keeps its hidden parameters exact; its sensors still read with a robot's noise, without which
# a twin's own log determines what moves its base by 1e-10 m/s
SENSOR_NOISE = FieldEffects(gyro_noise=0.01, odom_noise=0.01)


def robots() -> dict[str, FieldRobotConfig]:
    easy = load_field_robot(config_path("retrain") / "field_twin.yaml")
    return {
        "easy": FieldRobotConfig(easy.hidden, SENSOR_NOISE),
        "hard": load_field_robot(config_path("retrain") / "field_robot_hard.yaml"),
    }


def field_log(config: FieldRobotConfig, script: str, seconds: float):
    twin = BatchedTwin("rover", num_envs=1, seed=3, randomization=RandomizationConfig(enabled=False)).hold_commands()
    twin.reset()
    robot, controller = FieldRobot(twin, config), DiffDriveController(twin)
    segments = load_commands(config_path("sil") / SCRIPTS[script])
    log = drive_field_log(robot, lambda: controller()[0], lambda t: command_at(segments, t), seconds)
    return twin.spec, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each log (s)")
    parser.add_argument("--quick", action="store_true", help="smaller search (8 x 8 CMA-ES, 12 windows)")
    args = parser.parse_args()
    sizes = {"population": 8, "generations": 8} if args.quick else {"population": 12, "generations": 15, "runs": 2}
    windows = 12 if args.quick else 24
    rover = RetrainConfig.from_yaml().sysid_config("rover", Budget())  # the rover's search boxes
    cfg = SysIdConfig(params=PARAMS, bounds=rover.bounds, **sizes)
    results, biases, t0 = {}, {}, time.perf_counter()
    print(f"{'robot':<6}{'script':<11}{'parameter':<16}{'hidden':>8}{'fit':>9}  95% interval")
    for name, config in robots().items():
        hidden = {**NOMINAL, **config.hidden}
        for script in SCRIPTS:
            spec, log = field_log(config, script, args.seconds)
            bias = biases[f"{name}/{script}"] = gyro_bias([log])
            print(f"{name:<6}{script:<11}gyro bias (hidden {list(config.effects.gyro_bias)}): {bias.show()}")
            r = identify(spec, log_windows([bias.remove(log)], 0.1, windows), cfg)
            results[f"{name}/{script}"] = r
            for p, e in r.estimates.items():
                verdict = "determined" if e.determined else f"not determined: {e.why}"
                print(
                    f"{name:<6}{script:<11}{p:<16}{hidden[p]:>8.3g}{e.value:>9.3g}  {e.low:.3g} to {e.high:.3g}, "
                    f"{verdict}"
                )
            print(f"{'':<17}trajectory error: nominal twin {r.error_before:.4g}, fitted {r.error_after:.4g}")
    gained = {
        name: sorted(set(results[f"{name}/driving"].undetermined) - set(results[f"{name}/manoeuvre"].undetermined))
        for name in robots()
    }
    for name, params in gained.items():
        print(f"{name}: the manoeuvre determines {', '.join(params) or 'nothing'} that the driving script does not")
    print(f"total {time.perf_counter() - t0:.0f} s; load {os.getloadavg()[0]:.2f}")
    print(
        json.dumps(
            {
                "bench": "sysid_excitation",
                "quick": args.quick,
                "seconds": args.seconds,
                "determined": {k: [p for p in PARAMS if p not in r.undetermined] for k, r in results.items()},
                "estimates": {k: {p: e.to_dict() for p, e in r.estimates.items()} for k, r in results.items()},
                "traj_error": {k: [r.error_before, r.error_after] for k, r in results.items()},
                "gyro_bias": {k: b.to_dict() for k, b in biases.items()},
                "gained_by_manoeuvre": gained,
            }
        )
    )


if __name__ == "__main__":
    main()
