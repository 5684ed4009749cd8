"""Delegation tokens: issued to an authenticated user, later usable as SCRAM credentials.

A token's password is the HMAC-SHA512 of its id keyed with `delegation.token.secret.key`, so
any broker holding the key can recompute it and the store never keeps it. Tokens live where
Kafka keeps them, `/delegation_token/tokens/<id>` (token info plus the SCRAM credentials
derived from the HMAC); each write leaves a sequential `token_change_` notification naming the
token, so every broker's cache follows. Tokens past their expiry stop authenticating at once
and are deleted by a periodic sweep (`delegation.token.expiry.check.interval.ms`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any

from ..cluster import zk_data as zk
from ..cluster.change_notifications import NOTIFICATION_EXPIRY_MS, ChangeNotificationListener
from ..cluster.kafka_zk import KafkaZk
from ..cluster.metadata_store import NodeExistsError, NoNodeError, run_blocking
from ..protocol.errors import ErrorCode, KafkaError
from .scram import (
    MECHANISM_NAMES,
    ScramCredential,
    ScramMechanism,
    TokenLookup,
    credentials_from_config,
    generate_credential,
)

log = logging.getLogger(__name__)

TOKEN_ROOT = "/delegation_token"
TOKENS_PATH = f"{TOKEN_ROOT}/tokens"
CHANGES_PATH = f"{TOKEN_ROOT}/token_changes"
CHANGE_PREFIX = "token_change_"
TOKEN_FORMAT_VERSION = 3

DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 3600 * 1000
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 3600 * 1000

ConfigGetter = Callable[[str], Any]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TokenSettings:
    """`secret_key` None means tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED)."""

    secret_key: bytes | None = None
    max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS
    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS
    expiry_check_interval_ms: int = DEFAULT_EXPIRY_CHECK_INTERVAL_MS

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    @classmethod
    def from_props(cls, get: ConfigGetter) -> TokenSettings:
        # Kafka 3.9 reads the new name first and falls back to the deprecated one.
        key = get("delegation.token.secret.key") or get("delegation.token.master.key")

        def num(name: str, default: int) -> int:
            value = get(name)
            return int(value) if value not in (None, "") else default

        return cls(
            str(key).encode("utf-8") if key else None,
            num("delegation.token.max.lifetime.ms", DEFAULT_MAX_LIFETIME_MS),
            num("delegation.token.expiry.time.ms", DEFAULT_EXPIRY_TIME_MS),
            num("delegation.token.expiry.check.interval.ms", DEFAULT_EXPIRY_CHECK_INTERVAL_MS),
        )


@dataclass(frozen=True)
class TokenInfo:
    """Principals are full `Type:name` strings (e.g. `User:alice`)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.expiry_ms < now_ms or self.max_ms < now_ms


def new_token_id() -> str:
    """Kafka's token ids: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def compute_hmac(token_id: str, secret_key: bytes) -> bytes:
    return hmac.new(secret_key, token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_password(token_hmac: bytes) -> str:
    """The SCRAM password of a token: its HMAC in standard base64."""
    return base64.b64encode(token_hmac).decode("ascii")


def token_credentials(
    token_hmac: bytes, iterations: int = 4096
) -> dict[ScramMechanism, ScramCredential]:
    password = hmac_password(token_hmac)
    return {
        ScramMechanism.from_name(m): generate_credential(ScramMechanism.from_name(m), password,
                                                         iterations)
        for m in MECHANISM_NAMES
    }  # fmt: skip


def encode_token(info: TokenInfo, creds: dict[ScramMechanism, ScramCredential]) -> bytes:
    doc: dict[str, Any] = {
        "version": TOKEN_FORMAT_VERSION,
        "owner": zk.sanitize(info.owner),
        "tokenRequester": zk.sanitize(info.requester),
        "renewers": [zk.sanitize(r) for r in info.renewers],
        "issueTimestamp": info.issue_ms,
        "maxTimestamp": info.max_ms,
        "expiryTimestamp": info.expiry_ms,
        "tokenId": info.token_id,
    }
    for mech, cred in creds.items():
        doc[mech.mechanism_name] = cred.to_config_value()
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def decode_token(data: bytes) -> tuple[TokenInfo, dict[ScramMechanism, ScramCredential]]:
    doc = json.loads(bytes(data).decode("utf-8"))
    owner = zk.desanitize(doc["owner"])
    info = TokenInfo(
        doc["tokenId"],
        owner,
        zk.desanitize(doc["tokenRequester"]) if doc.get("tokenRequester") else owner,
        tuple(zk.desanitize(r) for r in doc.get("renewers", [])),
        int(doc["issueTimestamp"]),
        int(doc["maxTimestamp"]),
        int(doc["expiryTimestamp"]),
    )
    creds = credentials_from_config({k: v for k, v in doc.items() if isinstance(v, str)})
    return info, creds


def token_path(token_id: str) -> str:
    return f"{TOKENS_PATH}/{token_id}"


@dataclass(frozen=True)
class _Entry:
    info: TokenInfo
    creds: dict[ScramMechanism, ScramCredential]


class DelegationTokenManager:
    """Creates, renews, expires and lists tokens, and answers SCRAM's token lookups from a cache
    kept current by change notifications. Methods named `*_token`, `load` and `reload` block
    (run them on the metadata-store executor); `lookup` and `get*` only read the cache."""

    def __init__(
        self,
        zkc: KafkaZk,
        settings: TokenSettings,
        *,
        executor: Executor | None = None,
        clock: Callable[[], int] = _now_ms,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    ) -> None:
        self.zk = zkc
        self.settings = settings
        self.clock = clock
        self._executor = executor
        self._lock = threading.Lock()
        self._tokens: dict[str, _Entry] = {}
        self._by_hmac: dict[bytes, str] = {}
        self.notifications = ChangeNotificationListener(
            zkc,
            CHANGES_PATH,
            CHANGE_PREFIX,
            self._on_notification,
            what="delegation token change",
            executor=executor,
            expiry_ms=expiry_ms,
            clock_ms=clock,
        )
        self._sweeper: asyncio.Task[None] | None = None

    # -- cache -----------------------------------------------------------------------------

    def _hmac(self, token_id: str) -> bytes:
        assert self.settings.secret_key is not None
        return compute_hmac(token_id, self.settings.secret_key)

    def _put(self, info: TokenInfo, creds: dict[ScramMechanism, ScramCredential]) -> None:
        with self._lock:
            self._tokens[info.token_id] = _Entry(info, creds)
            if self.settings.enabled:
                self._by_hmac[self._hmac(info.token_id)] = info.token_id

    def _drop(self, token_id: str) -> None:
        with self._lock:
            if self._tokens.pop(token_id, None) is not None and self.settings.enabled:
                self._by_hmac.pop(self._hmac(token_id), None)

    def get(self, token_id: str) -> TokenInfo | None:
        entry = self._tokens.get(token_id)
        return entry.info if entry else None

    def get_by_hmac(self, token_hmac: bytes) -> TokenInfo | None:
        token_id = self._by_hmac.get(bytes(token_hmac))
        return self.get(token_id) if token_id else None

    def tokens(self) -> list[TokenInfo]:
        with self._lock:
            return sorted((e.info for e in self._tokens.values()), key=lambda i: i.issue_ms)

    def hmac_of(self, info: TokenInfo) -> bytes:
        return self._hmac(info.token_id) if self.settings.enabled else b""

    def lookup(self, mechanism: ScramMechanism | str) -> TokenLookup:
        """The `tokens` callable of a ScramServer: token id -> (credential, owner user name).
        Expired tokens are refused even before the sweep removes them."""
        if isinstance(mechanism, str):
            mechanism = ScramMechanism.from_name(mechanism)

        def find(token_id: str) -> tuple[ScramCredential, str] | None:
            if not self.settings.enabled:
                return None
            entry = self._tokens.get(token_id)
            if entry is None or entry.info.expired(self.clock()):
                return None
            cred = entry.creds.get(mechanism)
            if cred is None:
                return None
            _, _, owner = entry.info.owner.partition(":")
            return cred, owner

        return find

    # -- blocking store operations ---------------------------------------------------------

    def _notify(self, token_id: str) -> None:
        self.zk.store.ensure_path(CHANGES_PATH)
        self.zk.store.create(
            f"{CHANGES_PATH}/{CHANGE_PREFIX}", token_id.encode("utf-8"), sequential=True
        )

    def _write(self, info: TokenInfo, creds: dict[ScramMechanism, ScramCredential]) -> None:
        data = encode_token(info, creds)
        path = token_path(info.token_id)
        try:
            self.zk.create_recursive(path, data)
        except NodeExistsError:
            self.zk.store.set(path, data)
        self._put(info, creds)
        self._notify(info.token_id)

    def _remove(self, token_id: str) -> None:
        try:
            self.zk.store.delete(token_path(token_id))
        except NoNodeError:
            pass
        self._drop(token_id)
        self._notify(token_id)

    def _require_enabled(self) -> None:
        if not self.settings.enabled:
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
                             "Delegation Token feature is not enabled")  # fmt: skip

    def create_token(
        self, owner: str, requester: str, renewers: Iterable[str], max_lifetime_ms: int
    ) -> tuple[TokenInfo, bytes]:
        """A non-positive `max_lifetime_ms` means the configured maximum."""
        self._require_enabled()
        now = self.clock()
        max_life = self.settings.max_lifetime_ms
        if max_lifetime_ms > 0:
            max_life = min(max_life, max_lifetime_ms)
        max_ms = now + max_life
        info = TokenInfo(
            new_token_id(),
            owner,
            requester,
            tuple(renewers),
            now,
            max_ms,
            min(max_ms, now + self.settings.expiry_time_ms),
        )
        token_hmac = self._hmac(info.token_id)
        self._write(info, token_credentials(token_hmac))
        return info, token_hmac

    def _for_change(self, principal: str, token_hmac: bytes) -> tuple[TokenInfo, int]:
        self._require_enabled()
        token_id = self._by_hmac.get(bytes(token_hmac))
        entry = self._tokens.get(token_id) if token_id else None
        if entry is None:
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, "Delegation token not found")
        if not entry.info.owner_or_renewer(principal):
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
                             f"{principal} is neither the owner nor a renewer of the token")  # fmt: skip
        now = self.clock()
        if entry.info.expired(now):
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_EXPIRED, "Delegation token has expired")
        return entry.info, now

    def renew_token(self, principal: str, token_hmac: bytes, renew_period_ms: int) -> int:
        """Returns the new expiry; a negative period means `delegation.token.expiry.time.ms`."""
        info, now = self._for_change(principal, token_hmac)
        period = self.settings.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
        expiry = min(info.max_ms, now + period)
        entry = self._tokens[info.token_id]
        self._write(replace(info, expiry_ms=expiry), entry.creds)
        return expiry

    def expire_token(self, principal: str, token_hmac: bytes, expiry_period_ms: int) -> int:
        """A negative period removes the token now; otherwise its expiry moves to now+period
        (never beyond its maximum). Returns the new expiry."""
        info, now = self._for_change(principal, token_hmac)
        if expiry_period_ms < 0:
            self._remove(info.token_id)
            return now
        expiry = min(info.max_ms, now + expiry_period_ms)
        entry = self._tokens[info.token_id]
        self._write(replace(info, expiry_ms=expiry), entry.creds)
        return expiry

    def remove_expired(self) -> list[str]:
        """The periodic sweep: delete every expired token from the store."""
        now = self.clock()
        gone = [i.token_id for i in self.tokens() if i.expired(now)]
        for token_id in gone:
            log.info("Removing expired delegation token %s", token_id)
            self._remove(token_id)
        return gone

    def reload(self, token_id: str) -> None:
        found = self.zk.get_data(token_path(token_id))
        if found is None:
            self._drop(token_id)
            return
        info, creds = decode_token(found[0])
        self._put(info, creds)

    def load(self) -> None:
        self.zk.store.ensure_path(TOKENS_PATH)
        ids = self.zk.children(TOKENS_PATH)
        with self._lock:
            self._tokens.clear()
            self._by_hmac.clear()
        for token_id in ids:
            try:
                self.reload(token_id)
            except (ValueError, KeyError):
                log.exception("Ignoring unreadable delegation token %s", token_id)

    # -- change notifications and the expiry sweep -----------------------------------------

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self._executor, fn, *args)

    async def start(self) -> None:
        await self.notifications.skip_existing()
        await self._io(self.load)
        await self.notifications.start()
        if self.settings.enabled:
            self._sweeper = asyncio.create_task(self._sweep(), name="token-expiry")

    async def stop(self) -> None:
        await self.notifications.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def _on_notification(self, data: bytes) -> None:
        await self._io(self.reload, data.decode("utf-8"))

    async def _sweep(self) -> None:
        interval = max(self.settings.expiry_check_interval_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._io(self.remove_expired)
            except Exception:
                log.exception("Removing expired delegation tokens failed")
