"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
state of their transactions, kept in `__transaction_state`.

One `TransactionCoordinator` per broker serves the transactional ids whose
`__transaction_state` partition this broker leads. It knows nothing of sockets: request
handlers call its methods, and the server gives it a way to send WriteTxnMarkers.
"""

from .coordinator import InitResult, TransactionCoordinator, TransactionDescription
from .formats import TRANSACTION_STATE_TOPIC
from .manager import TransactionConfig
from .markers import UNKNOWN_LEADER, MarkerEntry
from .metadata import TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "UNKNOWN_LEADER",
    "InitResult",
    "MarkerEntry",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionDescription",
    "TxnState",
]
