"""Inputs and checks shared by several obligation modules (never obligations themselves)."""
