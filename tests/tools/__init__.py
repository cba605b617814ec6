"""Tests of the bundled tools."""
