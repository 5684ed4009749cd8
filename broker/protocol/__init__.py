"""The Kafka wire protocol: primitives, declarative schemas, the compiled codec, error codes.

Pure functions from bytes to dicts and back; no sockets, no asyncio.
"""

from .api_keys import ApiKey
from .codec import (
    ProtocolError,
    RecordsSource,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)
from .errors import ErrorCode, KafkaError

__all__ = [
    "ApiKey",
    "ErrorCode",
    "KafkaError",
    "ProtocolError",
    "RecordsSource",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "read_request_header",
]
