"""The broker process: the asyncio network layer, the dispatcher and one handler per API."""
