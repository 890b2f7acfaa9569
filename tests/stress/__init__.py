"""Stress suites of issue 7: faults, crashes, concurrency, bad input, isolation, secrets, fuzz.

Each suite writes its figures to ``.bench-results/reliability/<suite>.json``;
``python -m tests.stress.report`` renders them as the table in docs/reliability.md.
"""
