"""Helpers that run real server processes (Odradek brokers, Apache Kafka, ZooKeeper) on this
machine for the integration, chaos and operator tests and for the benchmarks in bench/.

The broker itself never imports this package: it lives in the distribution so that the tests
and bench/ (two trees that are not packages) share one implementation of starting, waiting
for, stopping and killing a server.
"""
