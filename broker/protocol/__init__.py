"""Odradek."""
