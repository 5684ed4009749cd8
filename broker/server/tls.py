"""TLS for SSL and SASL_SSL listeners: server contexts from Kafka's PEM properties, and a TLS
session over a raw non-blocking socket.

The session drives an `ssl.SSLObject` through memory BIOs rather than wrapping the socket, so
the network layer keeps its plain file descriptor and event-loop calls: ciphertext moves with
`sock_recv`/`sock_sendall`, and "want read" simply means "receive more ciphertext first".

Key and trust material is PEM only (Kafka's `ssl.keystore.type=PEM`): a key store file holding
the private key and its certificate chain, or the inline `ssl.keystore.key` and
`ssl.keystore.certificate.chain` values; trust as a PEM file of certificates or inline
`ssl.truststore.certificates`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

_RECV_CHUNK = 256 * 1024
_WRITE_CHUNK = 256 * 1024
_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# Python's getpeercert() attribute names -> the keywords Java prints in RFC 2253 names.
_DN_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_DN_SPECIAL = set(',+"\\<>;')

ConfigGetter = Callable[[str], "str | None"]


class TlsConfigError(ValueError):
    """Missing or unusable key store / trust store settings for a TLS listener."""


class TlsClosed(Exception):
    """The peer closed the TLS session or the handshake failed."""


def listener_getter(get_raw: ConfigGetter, listener: str) -> ConfigGetter:
    """`listener.name.<l>.<key>` when set, else the broker-wide `<key>`."""
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> str | None:
        value = get_raw(prefix + key)
        return value if value not in (None, "") else get_raw(key)

    return get


def _text(value: object) -> str | None:
    value = getattr(value, "value", value)  # password wrappers
    return None if value in (None, "") else str(value)


def client_auth(get_raw: ConfigGetter, listener: str, security_protocol: str) -> str:
    """`ssl.client.auth` of a listener. As in Kafka, a SASL_SSL listener only takes it from the
    listener-prefixed property (SASL authenticates those clients)."""
    prefixed = _text(get_raw(f"listener.name.{listener.lower()}.ssl.client.auth"))
    if security_protocol == "SASL_SSL":
        value = prefixed or "none"
    else:
        value = prefixed or _text(get_raw("ssl.client.auth")) or "none"
    value = value.strip().lower()
    if value not in ("none", "requested", "required"):
        raise TlsConfigError(f"Invalid value {value} for ssl.client.auth of listener {listener}")
    return value


def server_context(get_raw: ConfigGetter, listener: str, security_protocol: str) -> ssl.SSLContext:
    """The server-side SSLContext of one TLS listener."""
    get = listener_getter(get_raw, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in (_text(get("ssl.enabled.protocols")) or "").split(",")]
    known = sorted(_TLS_VERSIONS[v] for v in versions if v in _TLS_VERSIONS)
    if known:
        ctx.minimum_version, ctx.maximum_version = known[0], known[-1]
    _load_key_store(ctx, get, listener)
    _load_trust_store(ctx, get)
    auth = client_auth(get_raw, listener, security_protocol)
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[auth]
    if auth != "none" and not ctx.get_ca_certs():
        raise TlsConfigError(
            f"listener {listener}: ssl.client.auth={auth} needs ssl.truststore.location "
            "or ssl.truststore.certificates"
        )
    return ctx


def client_context(get_raw: ConfigGetter, listener: str) -> ssl.SSLContext:
    """The client-side SSLContext a broker uses towards another broker's TLS `listener`: the
    listener's trust store (else the system's CAs), its key store as the client certificate
    when one is set, and host name checks unless ssl.endpoint.identification.algorithm is
    empty (Kafka's rules for its inter-broker clients)."""
    get = listener_getter(get_raw, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _load_trust_store(ctx, get)
    if not ctx.get_ca_certs():
        ctx.load_default_certs()
    if _text(get("ssl.keystore.location")) or _text(get("ssl.keystore.key")):
        _load_key_store(ctx, get, listener)
    algorithm = get("ssl.endpoint.identification.algorithm")  # default https
    ctx.check_hostname = algorithm is None or str(algorithm) != ""
    return ctx


def _require_pem(kind: str, declared: str | None, text: str, source: str) -> None:
    if "-----BEGIN" not in text:
        raise TlsConfigError(
            f"{source} is not PEM ({kind}.type={declared or 'JKS'}); only PEM is supported"
        )


def _require_pem_file(kind: str, declared: str | None, location: str, what: str) -> None:
    """Refuse a `kind`.location file that cannot be read or is not PEM, naming it in the error."""
    try:
        text = Path(location).read_text(errors="replace")
    except OSError as e:
        raise TlsConfigError(f"cannot read {kind}.location {location}: {e}") from e
    _require_pem(kind, declared, text, f"{what} {location}")


def _load_key_store(ctx: ssl.SSLContext, get: ConfigGetter, listener: str) -> None:
    key_password = _text(get("ssl.key.password"))
    declared = _text(get("ssl.keystore.type"))
    chain = _text(get("ssl.keystore.certificate.chain"))
    key = _text(get("ssl.keystore.key"))
    location = _text(get("ssl.keystore.location"))
    if chain and key:
        _require_pem("ssl.keystore", declared, chain + key, "ssl.keystore.key")
        # load_cert_chain only reads files: a private, short-lived one.
        fd, path = tempfile.mkstemp(prefix="odradek-key-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(chain.strip() + "\n" + key.strip() + "\n")
            ctx.load_cert_chain(path, password=key_password)
        finally:
            os.unlink(path)
        return
    if location:
        _require_pem_file("ssl.keystore", declared, location, "key store")
        try:
            ctx.load_cert_chain(location, password=key_password)
        except ssl.SSLError as e:
            raise TlsConfigError(f"key store {location}: {e}") from e
        return
    raise TlsConfigError(
        f"listener {listener} uses TLS but has no key store: set ssl.keystore.location "
        "(PEM key and certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain"
    )


def _load_trust_store(ctx: ssl.SSLContext, get: ConfigGetter) -> None:
    declared = _text(get("ssl.truststore.type"))
    inline = _text(get("ssl.truststore.certificates"))
    location = _text(get("ssl.truststore.location"))
    if inline:
        _require_pem("ssl.truststore", declared, inline, "ssl.truststore.certificates")
        ctx.load_verify_locations(cadata=inline)
    elif location:
        _require_pem_file("ssl.truststore", declared, location, "trust store")
        ctx.load_verify_locations(cafile=location)


def _escape_dn_value(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in _DN_SPECIAL or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def distinguished_name(cert: dict) -> str:
    """The subject as Java's X500Principal.getName() (RFC 2253) prints it: most specific RDN
    first, e.g. `CN=alice,OU=eng,O=example`."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        parts = [f"{_DN_KEYWORDS.get(k, k)}={_escape_dn_value(v)}" for k, v in rdn]
        rdns.append("+".join(parts))
    return ",".join(rdns)


class TlsSession:
    """One server-side TLS session on a non-blocking socket, driven through memory BIOs."""

    def __init__(
        self, ctx: ssl.SSLContext, sock: socket.socket, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.sock = sock
        self.loop = loop
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self._in, self._out, server_side=True)

    async def _flush(self) -> None:
        data = self._out.read()
        if data:
            await self.loop.sock_sendall(self.sock, data)

    async def _fill(self) -> None:
        data = await self.loop.sock_recv(self.sock, _RECV_CHUNK)
        if not data:
            self._in.write_eof()
            raise TlsClosed("peer closed the connection")
        self._in.write(data)

    async def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
            except ssl.SSLError as e:
                # Send the alert (e.g. "certificate required") before giving up.
                try:
                    await self._flush()
                except OSError:
                    pass
                raise TlsClosed(f"TLS handshake failed: {e}") from e
        await self._flush()

    def principal(self) -> str | None:
        """`User:<DN>` of a verified client certificate, else None."""
        cert = self.obj.getpeercert()
        if not cert:
            return None
        return f"User:{distinguished_name(cert)}"

    async def recv_into(self, view: memoryview) -> int:
        """Decrypted bytes into `view`; 0 once the peer closed the session."""
        while True:
            try:
                n = self.obj.read(len(view), view)
            except ssl.SSLWantReadError:
                await self._flush()
                try:
                    await self._fill()
                except TlsClosed:
                    return 0
                continue
            except ssl.SSLZeroReturnError:
                return 0
            except ssl.SSLError as e:
                raise TlsClosed(f"TLS error: {e}") from e
            # Reading may produce records to send (TLS 1.3 key updates, session tickets).
            await self._flush()
            return n

    async def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        for start in range(0, len(view), _WRITE_CHUNK):
            chunk = view[start : start + _WRITE_CHUNK]
            written = 0
            while written < len(chunk):
                try:
                    written += self.obj.write(chunk[written:])
                except ssl.SSLError as e:
                    raise TlsClosed(f"TLS error: {e}") from e
            await self._flush()
