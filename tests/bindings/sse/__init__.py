"""Tests of the sse bindings."""
