"""Throwaway PEM certificates for TLS tests: a CA, a server certificate for 127.0.0.1/localhost
and client certificates, all signed by the CA."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pem:
    cert: Path
    key: Path
    # Key and certificate in one file: what `ssl.keystore.location` (PEM) points to.
    combined: Path


def _name(cn: str, ou: str | None = None, org: str = "Odradek Tests") -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]  # fmt: skip
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    signer: ec.EllipticCurvePrivateKey,
    backdate: datetime.timedelta,
    days: int,
    extensions: list[tuple[x509.ExtensionType, bool]],
    *,
    ca: bool = False,
) -> x509.Certificate:
    """The certificate of `key` signed by `signer`, valid from `backdate` ago for `days` days."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def ca_certificate(
    name: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    backdate: datetime.timedelta,
    *,
    signs_data: bool,
) -> x509.Certificate:
    """A self-signed CA certificate for two days: it signs certificates and CRLs (and, with
    `signs_data`, digital signatures)."""
    # digital_signature, content_commitment, key/data encipherment, key_agreement,
    # key_cert_sign, crl_sign, encipher_only, decipher_only
    usage = x509.KeyUsage(signs_data, False, False, False, False, True, True, False, False)
    return _certificate(name, name, key, key, backdate, 2, [(usage, True)], ca=True)


def leaf_certificate(
    subject: x509.Name,
    ca: tuple[x509.Name, ec.EllipticCurvePrivateKey],
    key: ec.EllipticCurvePrivateKey,
    backdate: datetime.timedelta,
    server_names: list[x509.GeneralName] | None,
) -> x509.Certificate:
    """A one-day certificate signed by `ca` (its name and key): a server's for `server_names`,
    or a client's when there are none."""
    if server_names is None:
        usage = [(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)]
    else:
        usage = [
            (x509.SubjectAlternativeName(server_names), False),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ]
    return _certificate(subject, ca[0], key, ca[1], backdate, 1, usage)


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> Pem:
    cert_pem, private = cert.public_bytes(serialization.Encoding.PEM), key_pem(key)
    paths = Pem(directory / f"{stem}.crt", directory / f"{stem}.key", directory / f"{stem}.pem")
    paths.cert.write_bytes(cert_pem)
    paths.key.write_bytes(private)
    paths.combined.write_bytes(private + cert_pem)
    return paths


BACKDATE = datetime.timedelta(hours=1)  # clock skew between the test and the broker


class CertificateAuthority:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name("Odradek Test CA")
        self.cert = ca_certificate(self.name, self.key, BACKDATE, signs_data=False)
        self.pem = _write(directory, "ca", self.cert, self.key)

    def issue(self, stem: str, cn: str, *, ou: str | None = None, server: bool = False) -> Pem:
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        ca = (self.name, self.key)
        cert = leaf_certificate(_name(cn, ou), ca, key, BACKDATE, names if server else None)
        return _write(self.directory, stem, cert, key)
