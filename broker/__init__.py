"""Odradek broker: protocol, records, storage, cluster, server and the shared client."""

__version__ = "0.1.0"
