"""Helpers shared by tests: real servers, certificates, small clients."""
