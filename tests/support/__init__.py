"""Helpers shared by several test files (strategies, builders); never tests themselves."""
