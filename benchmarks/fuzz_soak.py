"""Fuzz soak: every parser and boundary of tests/fuzz_targets.py fed many generated inputs (hypothesis), counting
what each one was tried with and how many inputs escaped as anything but a typed, clear error or a safe output.

The target is 0 unhandled over >= 10,000 inputs per parser. There is no speed anchor here: the figure is the
count, and the anchor is the test suite's own small run of the same properties (tests/test_fuzz_parsers.py).

    python -m benchmarks.fuzz_soak [--quick] [--examples N] [--only manifest,plan_json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="500 inputs per target")
    parser.add_argument("--examples", type=int, default=10_000, help="inputs per target (default %(default)s)")
    parser.add_argument("--only", default="", help="comma-separated target names")
    args = parser.parse_args()
    examples = 500 if args.quick else args.examples

    from hypothesis import HealthCheck, given, settings

    from tests.fuzz_targets import Tally, tallied, targets

    warnings.simplefilter("ignore")
    chosen = [t for t in targets() if not args.only or t.name in args.only.split(",")]
    results: dict[str, dict] = {}
    print(f"{'target':<16}{'inputs':>9}{'unhandled':>11}{'seconds':>9}  first unhandled")
    for target in chosen:
        tally = Tally()
        run = settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))(
            given(target.strategy)(tallied(target.check, tally))
        )
        t0 = time.perf_counter()
        run()
        seconds = time.perf_counter() - t0
        first = tally.unhandled[0] if tally.unhandled else ""
        print(f"{target.name:<16}{tally.tried:>9}{len(tally.unhandled):>11}{seconds:>9.1f}  {first[:70]}")
        results[target.name] = {"inputs": tally.tried, "unhandled": len(tally.unhandled), "seconds": round(seconds, 1)}
    total_tried = sum(r["inputs"] for r in results.values())
    total_unhandled = sum(r["unhandled"] for r in results.values())
    load = os.getloadavg()[0]
    print(f"total: {total_tried} inputs, {total_unhandled} unhandled (load average {load:.2f})")
    print(
        json.dumps(
            {
                "bench": "fuzz_soak",
                "inputs_tried": total_tried,
                "unhandled": total_unhandled,
                "per_target": results,
                "examples_per_target": examples,
                "load_average": round(load, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
