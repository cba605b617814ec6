"""Helpers shipped for tests, examples and benchmarks (keystores for ``localhost``)."""
