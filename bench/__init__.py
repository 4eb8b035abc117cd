"""Benchmarks for issue #7: the claim costs O(rows due), not O(tenants).

Run with ``python -m bench`` (``--quick`` for a smoke run); see bench/README.md.
"""
