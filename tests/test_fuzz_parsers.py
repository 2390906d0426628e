"""Property tests of every parser and boundary (tests/fuzz_targets.py): each generated input gives a typed, clear
error or a safe output, never another exception. Case counts are small here; benchmarks/fuzz_soak.py runs
10,000 per target."""

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz_targets import targets

# robot YAMLs compile an MJCF per case: fewer of them
EXAMPLES = {"robot_yaml": 25, "mcap_bytes": 60}


@pytest.mark.parametrize("target", targets(), ids=lambda t: t.name)
def test_parser_gives_typed_error_or_safe_output(target):
    @settings(
        max_examples=EXAMPLES.get(target.name, 150),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(target.strategy)
    def run(value):
        target.check(value)

    run()
