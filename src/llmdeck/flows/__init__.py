"""Flows: multi-step jobs built from the library (quickstart)."""
