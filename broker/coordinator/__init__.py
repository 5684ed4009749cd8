"""Coordinators: the group coordinator (__consumer_offsets) and the transaction coordinator (__transaction_state)."""
