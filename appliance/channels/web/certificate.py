"""The web face's TLS certificate: made at the first start, kept in the data dir, renewed before it expires.

One self-signed certificate (ECDSA P-256, cheap on a Pi) for every name and address the appliance answers
to (``hosts.SiteNames``): its host name, ``<hostname>.local``, localhost and its addresses. No local CA:
a CA key on the Pi could vouch for any site to a browser that trusted it; a leaf can only be this Pi.

The key is made once and kept (``tls/key.pem``, 0600); renewing re-signs a certificate for the same key,
30 days before it expires or as soon as the names or addresses change. So the fingerprint people are
shown, the SHA-256 of the certificate's public key (SubjectPublicKeyInfo, what ``curl --pinnedpubkey``
pins and what Chromium shows as the "Public Key" fingerprint), stays the same for the life of the Pi,
even though the certificate itself is re-issued. Making a key and a certificate takes a few milliseconds.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from appliance.channels.web.hosts import SiteNames
from appliance.errors import PicoagentError
from appliance.fileio import write_atomic

log = logging.getLogger(__name__)

FOLDER = "tls"
CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
VALID_DAYS = 365
RENEW_DAYS = 30
# A Pi has no real-time clock: before NTP answers it may believe it is years ago. A certificate is never
# dated before this, so a clock stuck in the past cannot make one that expired before it was made.
EARLIEST = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class SiteCertificate:
    """The certificate in use: where it is, what it names, until when, and its public key's fingerprint."""

    cert_path: Path
    key_path: Path
    names: tuple[str, ...]
    addresses: tuple[str, ...]
    not_after: datetime.datetime
    spki_sha256: bytes

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the public key as hex pairs, e.g. ``3A:5F:...`` (the same across renewals)."""
        return ":".join(f"{b:02X}" for b in self.spki_sha256)

    @property
    def pin(self) -> str:
        """The same hash as curl's ``--pinnedpubkey`` takes it: ``sha256//`` and base64."""
        return "sha256//" + base64.b64encode(self.spki_sha256).decode("ascii")

    def curl_command(self, url: str) -> str:
        """A curl command that trusts exactly this key (see :func:`curl_command`)."""
        return curl_command(self.pin, url)

    def server_context(self) -> ssl.SSLContext:
        """A server-side SSL context with this certificate (TLS 1.2 and up, HTTP/1.1)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])  # aiohttp's server speaks HTTP/1.1 only
        self.load_into(context)
        return context

    def load_into(self, context: ssl.SSLContext) -> None:
        """Put this certificate into ``context``: new handshakes use it, open connections keep theirs."""
        context.load_cert_chain(self.cert_path, self.key_path)

    def client_context(self) -> ssl.SSLContext:
        """A client-side SSL context trusting this certificate only, host names checked (the local CLI, tests)."""
        return ssl.create_default_context(cafile=str(self.cert_path))

    def as_dict(self) -> dict[str, object]:
        """For /api/status and ``picoagent status --json``."""
        return {
            "fingerprint_sha256": self.fingerprint,
            "pin": self.pin,
            "names": list(self.names),
            "addresses": list(self.addresses),
            "expires_at": self.not_after.isoformat(timespec="seconds"),
        }


def curl_command(pin: str, url: str) -> str:
    """curl trusting exactly the key ``pin`` names: --insecure turns off the CA check, which a self-signed
    certificate cannot pass, and --pinnedpubkey puts a stricter one in its place (curl refuses any other key).
    A ``NAME.local`` this machine cannot resolve (no mDNS here) is written as 127.0.0.1: the command is run
    where it is printed, and the pin, not the name, is what is checked."""
    return f"curl --insecure --pinnedpubkey {pin} {_resolvable(url)}"


def _resolvable(url: str) -> str:
    import socket
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if not host.endswith(".local"):
        return url
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return url.replace(f"//{host}", "//127.0.0.1", 1)
    return url


def folder(root: Path) -> Path:
    """Where the certificate and its key live in a data dir."""
    return root / FOLDER


def _spki_sha256(cert: x509.Certificate) -> bytes:
    der = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).digest()


def _described(cert: x509.Certificate, cert_path: Path, key_path: Path) -> SiteCertificate:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple(sans.get_values_for_type(x509.DNSName))
        addresses = tuple(str(a) for a in sans.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        names, addresses = (), ()
    return SiteCertificate(cert_path, key_path, names, addresses, cert.not_valid_after_utc, _spki_sha256(cert))


def read_certificate(root: Path) -> SiteCertificate | None:
    """The certificate kept in data dir ``root``, without changing anything; None when there is none."""
    where = folder(root)
    try:
        cert = x509.load_pem_x509_certificate((where / CERT_FILE).read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    return _described(cert, where / CERT_FILE, where / KEY_FILE)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey | None:
    """The kept key; None when there is none. An unreadable one is set aside (never deleted) and None returned."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        key = serialization.load_pem_private_key(data, password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key
        reason = "it is not an EC key"
    except (ValueError, TypeError) as exc:
        reason = str(exc) or type(exc).__name__
    aside = path.with_name(path.name + ".unreadable")
    path.replace(aside)
    log.warning("TLS key %s is unusable (%s): kept as %s, made a new one; the fingerprint changes", path, reason, aside)
    return None


def _sign(
    key: ec.EllipticCurvePrivateKey, names: list[str], addresses: list[str], now: datetime.datetime
) -> x509.Certificate:
    common = names[0] if names else "picoagent"
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, common), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "picoagent")]
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    start = max(now, EARLIEST)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(days=1))
        .not_valid_after(start + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _why_renew(
    current: SiteCertificate | None,
    key: ec.EllipticCurvePrivateKey,
    wanted: tuple[set[str], set[str]],
    now: datetime.datetime,
) -> str | None:
    if current is None:
        return "made"
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if current.spki_sha256 != hashlib.sha256(der).digest():
        return "made for its key"
    left = current.not_after - now
    if left < datetime.timedelta(days=RENEW_DAYS):
        return f"renewed: it expired {-left.days} day(s) ago" if left.days < 0 else f"renewed: {left.days} day(s) left"
    if (set(current.names), set(current.addresses)) != wanted:
        return "renewed: the names or addresses changed"
    return None


def ensure_certificate(
    root: Path, site: SiteNames, *, now: datetime.datetime | None = None
) -> tuple[SiteCertificate, str]:
    """The certificate for ``site``'s names, made or renewed as needed; and what was done ("kept", "made", ...)."""
    now = now or datetime.datetime.now(datetime.UTC)
    where = folder(root)
    key_path, cert_path = where / KEY_FILE, where / CERT_FILE
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = _load_key(key_path)
        if key is None:
            key = ec.generate_private_key(ec.SECP256R1())
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            write_atomic(key_path, pem.decode("ascii"), mode=0o600)
        current = read_certificate(root)
        names, addresses = sorted(site.names), sorted(site.addresses, key=lambda a: (":" in a, a))
        why = _why_renew(current, key, (set(names), set(addresses)), now)
        if why is None and current is not None:
            return current, "kept"
        cert = _sign(key, names, addresses, now)
        write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM).decode("ascii"), mode=0o644)
    except OSError as exc:
        raise PicoagentError(
            f"cannot keep the TLS certificate in {where}: {exc.strerror}",
            fix="make the data dir writable by the user picoagent runs as, or set web.tls: off",
        ) from None
    made = _described(cert, cert_path, key_path)
    log.info("TLS certificate %s for %s (until %s)", why, ", ".join(names + addresses), made.not_after.date())
    return made, str(why)


def refresh_certificate(
    root: Path, site: SiteNames, context: ssl.SSLContext, *, now: datetime.datetime | None = None
) -> SiteCertificate | None:
    """Renew the certificate if it is due and put it into the running site's ``context``; None when kept.

    The daemon calls this once a day (in a thread), so a Pi that runs for a year is never served expired.
    """
    certificate, why = ensure_certificate(root, site, now=now)
    if why == "kept":
        return None
    certificate.load_into(context)
    return certificate
