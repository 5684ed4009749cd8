"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them.

Credentials are kept the way Kafka keeps them in `/config/users/<user>` (config key = mechanism
name, value `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`), so a user created by
Apache Kafka's tools authenticates here and vice versa. `ScramServer` is the server side of one
exchange; it never sees the password, only the stored credential.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from .errors import SaslAuthenticationError

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramAuthError(SaslAuthenticationError):
    """The exchange failed; the connection gets SASL_AUTHENTICATION_FAILED and is closed."""


class ScramMechanism(IntEnum):
    """Wire values of the Describe/AlterUserScramCredentials `mechanism` field."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name, which is also the config key in /config/users/<user>."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {1: "sha256", 2: "sha512"}[self.value]

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if m.mechanism_name == name:
                return m
        return cls.UNKNOWN


MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hmac(mechanism: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mechanism.hash_name).digest()


def _h(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(
    mechanism: ScramMechanism, password: str | bytes, salt: bytes, iterations: int
) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802: PBKDF2 with HMAC-H. (No SASLprep, as Kafka.)"""
    pw = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mechanism.hash_name, pw, salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config_value(self) -> str:
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config_value(cls, value: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ValueError(f"Invalid SCRAM credential: {e}") from None


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials receives (salt, SaltedPassword) turned into what is stored."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt,
        _h(mechanism, client_key),
        _hmac(mechanism, salted, b"Server Key"),
        iterations,
    )


def generate_credential(
    mechanism: ScramMechanism,
    password: str | bytes,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    if salt is None:
        salt = secrets.token_bytes(32)
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


# -- message parsing ----------------------------------------------------------------------------


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramAuthError(f"Invalid SCRAM attribute {part!r}")
        out.append((part[0], part[2:]))
    return out


def decode_saslname(name: str) -> str:
    """RFC 5802 saslname: `=2C` is a comma, `=3D` an equals sign; any other `=` is invalid."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i : i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ScramAuthError("Invalid username encoding")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str


def parse_client_first(data: bytes) -> ClientFirst:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramAuthError("client-first-message is not UTF-8") from None
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise ScramAuthError("Invalid client-first-message")
    cbind, authz, bare = parts
    if cbind == "p" or cbind.startswith("p="):
        raise ScramAuthError("Channel binding is not supported")
    if cbind not in ("n", "y"):
        raise ScramAuthError("Invalid GS2 header")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise ScramAuthError("Invalid authorization identity")
        authzid = decode_saslname(authz[2:])
    attrs = _attributes(",".join(bare.split(",")[:2]))  # extensions follow n= and r=
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        raise ScramAuthError("client-first-message must start with n= and r=")
    if not attrs[1][1]:
        raise ScramAuthError("Empty client nonce")
    extensions = {}
    for part in bare.split(",")[2:]:
        key, _, value = part.partition("=")
        extensions[key] = value
    return ClientFirst(
        f"{cbind},{authz},", authzid, decode_saslname(attrs[0][1]), attrs[1][1], extensions, bare
    )


# -- the server side of one exchange ---------------------------------------------------------

CredentialLookup = Callable[[str], "ScramCredential | None"]
# token id -> (the token's credential, its owner's principal name), for tokenauth=true.
TokenLookup = Callable[[str], "tuple[ScramCredential, str] | None"]


class ScramServer:
    """States: initial -> (client-first) -> awaiting final -> (client-final) -> complete.

    `evaluate(token)` returns the server's reply; any failure raises ScramAuthError. On success
    `authorization_id` is the authenticated user name (the token owner for delegation tokens)
    and `token_authenticated` tells which.
    """

    def __init__(
        self,
        mechanism: ScramMechanism | str,
        credentials: CredentialLookup,
        tokens: TokenLookup | None = None,
        *,
        server_nonce: str | None = None,
    ) -> None:
        if isinstance(mechanism, str):
            mechanism = ScramMechanism.from_name(mechanism)
        if mechanism == ScramMechanism.UNKNOWN:
            raise ValueError("Unsupported SCRAM mechanism")
        self.mechanism = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)
        self._state = "initial"
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._pending_principal = ""
        self.authorization_id: str | None = None
        self.token_authenticated = False
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "initial":
                return self._on_client_first(token)
            if self._state == "awaiting-final":
                return self._on_client_final(token)
        except ScramAuthError:
            self._state = "failed"
            raise
        raise ScramAuthError(f"Unexpected SCRAM message in state {self._state}")

    def _on_client_first(self, token: bytes) -> bytes:
        first = parse_client_first(token)
        self.extensions = dict(first.extensions)
        username = first.username
        if first.extensions.get("tokenauth", "").lower() == "true":
            found = self._tokens(username) if self._tokens is not None else None
            if found is None:
                raise ScramAuthError("Authentication failed: Invalid user credentials")
            credential, owner = found
            self.token_authenticated = True
            principal = owner
        else:
            credential = self._credentials(username)
            if credential is None:
                raise ScramAuthError("Authentication failed: Invalid user credentials")
            principal = username
        if first.authzid and first.authzid != username:
            raise ScramAuthError("Authentication failed: Client requested an authorization id "
                                 "that is different from username")  # fmt: skip
        if credential.iterations < MIN_ITERATIONS:
            raise ScramAuthError("Iterations less than minimum")
        self._first = first
        self._credential = credential
        self._pending_principal = principal
        nonce = first.nonce + self._server_nonce
        self._server_first = f"r={nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "awaiting-final"
        return self._server_first.encode("utf-8")

    def _on_client_final(self, token: bytes) -> bytes:
        assert self._first is not None and self._credential is not None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramAuthError("client-final-message is not UTF-8") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramAuthError("client-final-message without proof")
        attrs = dict(_attributes(without_proof))
        expected_cbind = _b64(self._first.gs2_header.encode("utf-8"))
        if attrs.get("c") != expected_cbind:
            raise ScramAuthError("Invalid channel binding")
        if attrs.get("r") != self._first.nonce + self._server_nonce:
            raise ScramAuthError("Invalid nonce")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramAuthError("Invalid client proof encoding") from None
        auth_message = f"{self._first.bare},{self._server_first},{without_proof}".encode()
        cred = self._credential
        signature = _hmac(self.mechanism, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramAuthError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_h(self.mechanism, client_key), cred.stored_key):
            raise ScramAuthError("Authentication failed: Invalid user credentials")
        server_signature = _hmac(self.mechanism, cred.server_key, auth_message)
        self.authorization_id = self._pending_principal
        self._state = "complete"
        return f"v={_b64(server_signature)}".encode()


def credentials_from_config(config: dict[str, str]) -> dict[ScramMechanism, ScramCredential]:
    """The SCRAM entries of a /config/users/<user> config (other keys, e.g. quotas, ignored)."""
    out = {}
    for name in MECHANISM_NAMES:
        if name in config:
            try:
                out[ScramMechanism.from_name(name)] = ScramCredential.from_config_value(
                    config[name]
                )
            except ValueError:
                continue
    return out
