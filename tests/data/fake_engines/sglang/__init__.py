"""Fake package for teller hook tests: same qualified names as the real engine."""
