"""Ratio benchmarks of django_snowflake against baselines measured in the same run.

Run them from the repository root with ``python -m benchmarks`` (``--quick`` for a smoke
run with row counts scaled down); see ``docs/performance.rst`` for what each section
measures and the latest results. They are not part of the test suite.
"""
