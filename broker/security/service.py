"""Everything a broker needs from the security and quota layers, kept current from the store.

One object for the server to create, start and consult:
`authorizer` (ACL cache fed by /kafka-acl*-changes), `scram_credentials` and `quotas` (both fed
by /config/changes through `on_entity_config`, which the broker passes to its
ConfigChangeListener), `tokens` (delegation tokens, fed by /delegation_token/token_changes),
plus `new_sasl_server` per listener.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any

from ..cluster.kafka_zk import KafkaZk
from ..cluster.metadata_store import run_blocking
from ..quotas.config import QuotaConfigCache
from ..quotas.manager import QuotaManager, QuotaSettings
from .acl import AclAuthorizer, AclCache, ResourcePattern, parse_super_users
from .acl_store import AclChangeListener
from .credentials import ScramCredentialCache
from .plain import plain_users
from .sasl import SUPPORTED_MECHANISMS, SaslServer, enabled_mechanisms, new_sasl_server
from .scram import TokenLookup
from .tokens import DelegationTokenManager, TokenSettings

log = logging.getLogger(__name__)

ConfigGetter = Callable[[str], Any]


def _getter(config: Mapping[str, Any] | ConfigGetter) -> ConfigGetter:
    return config.get if isinstance(config, Mapping) else config


class SecurityService:
    def __init__(
        self,
        zkc: KafkaZk,
        config: Mapping[str, Any] | ConfigGetter,
        *,
        executor: Executor | None = None,
        tokens: TokenLookup | None = None,
    ) -> None:
        """`config`: raw property strings, e.g. `BrokerConfig.get_raw` (listener-prefixed keys
        and password values included)."""
        self.zk = zkc
        self._get = _getter(config)
        self._executor = executor
        self._tokens = tokens
        allow = str(self._get("allow.everyone.if.no.acl.found") or "false").lower() == "true"
        self.authorizer = AclAuthorizer(
            AclCache(),
            super_users=parse_super_users(self._get("super.users")),
            allow_everyone_if_no_acl_found=allow,
        )
        self.scram_credentials = ScramCredentialCache()
        self.quotas = QuotaManager(QuotaConfigCache(), QuotaSettings.from_props(self._get))
        self._acl_listener = AclChangeListener(zkc, self.authorizer.cache, executor=executor)
        self.tokens = DelegationTokenManager(
            zkc, TokenSettings.from_props(self._get), executor=executor
        )

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self._executor, fn, *args)

    async def start(self) -> None:
        """Load ACLs, SCRAM credentials and quotas; then follow ACL change notifications."""
        await self._io(self.scram_credentials.load, self.zk)
        await self._io(self.quotas.cache.load, self.zk)
        await self._acl_listener.start()
        await self.tokens.start()

    async def stop(self) -> None:
        await self.tokens.stop()
        await self._acl_listener.stop()

    async def refresh_acls(self, patterns: Iterable[ResourcePattern]) -> None:
        """This broker wrote these ACL patterns: its cache reads them before it answers."""
        await self._acl_listener.refresh(patterns)

    async def on_entity_config(self, entity_type: str, name: str) -> None:
        """ConfigChangeListener's `on_entity_config`: users and clients changed."""
        await self._io(self.scram_credentials.reload_entity, self.zk, entity_type, name)
        await self._io(self.quotas.cache.reload_entity, self.zk, entity_type, name)

    def sasl_mechanisms(self, listener: str) -> list[str]:
        """The mechanisms `listener` enables that Odradek offers (what SaslHandshake lists)."""
        return [m for m in enabled_mechanisms(self._get, listener) if m in SUPPORTED_MECHANISMS]

    def warn_unsupported_sasl(self, listener: str) -> None:
        """One warning at start-up for configured mechanisms Odradek does not offer: clients
        asking for them get UNSUPPORTED_SASL_MECHANISM."""
        unsupported = [
            m for m in enabled_mechanisms(self._get, listener) if m not in SUPPORTED_MECHANISMS
        ]
        if unsupported:
            log.warning(
                "listener %s: SASL mechanism %s not supported by Odradek (it offers %s); "
                "clients that ask for it get UNSUPPORTED_SASL_MECHANISM",
                listener,
                ", ".join(unsupported),
                ", ".join(SUPPORTED_MECHANISMS),
            )

    def new_sasl_server(self, listener: str, mechanism: str) -> SaslServer:
        """Raises UnsupportedSaslMechanismError when `listener` does not enable `mechanism`."""
        return new_sasl_server(
            mechanism,
            self.sasl_mechanisms(listener),
            plain_users=plain_users(self._get, listener) if mechanism == "PLAIN" else None,
            scram_credentials=self.scram_credentials,
            tokens=self._tokens if self._tokens is not None else self.tokens.lookup(mechanism),
        )
