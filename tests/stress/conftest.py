"""Wall time of each stress suite, recorded with its figures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.stress.helpers import Stopwatch, write_figures

SUITES = {
    "test_faults": "faults",
    "test_crashes": "crashes",
    "test_concurrency": "concurrency",
    "test_bad_input": "bad_input",
    "test_isolation": "isolation",
    "test_secrets_leak": "secrets",
    "test_fuzz": "fuzz",
}


@pytest.fixture(scope="module", autouse=True)
def _suite_wall_time(request: pytest.FixtureRequest) -> Iterator[None]:
    clock = Stopwatch()
    yield
    suite = SUITES.get(request.module.__name__.rsplit(".", 1)[-1])
    if suite is not None and request.session.testsfailed == 0:
        write_figures(suite, {"wall_seconds": clock.seconds})
