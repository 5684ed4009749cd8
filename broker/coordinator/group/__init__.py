"""The classic group coordinator: membership, rebalances and committed offsets.

One `GroupCoordinator` per broker serves the groups whose `__consumer_offsets` partition
this broker leads. It knows nothing of sockets: request handlers call its methods.
"""

from .coordinator import GroupCoordinator, GroupCoordinatorConfig
from .formats import OFFSETS_TOPIC, partition_for

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupCoordinatorConfig", "partition_for"]
