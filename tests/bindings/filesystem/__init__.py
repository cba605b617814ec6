"""Filesystem server tests: a package, so this test_server module has its own name."""
