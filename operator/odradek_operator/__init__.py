"""Odradek's Kubernetes operator (kopf); imported as odradek.operator."""
