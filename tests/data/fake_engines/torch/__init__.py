"""Fake torch for teller hook tests."""
