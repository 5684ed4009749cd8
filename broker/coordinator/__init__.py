"""Coordinators: the group coordinator (__consumer_offsets); transactions come later."""
