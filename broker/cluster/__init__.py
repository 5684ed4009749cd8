"""Cluster metadata: the metadata stores (ZooKeeper, embedded), the controller, the metadata cache."""
