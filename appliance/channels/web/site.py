"""How people reach the web face: its URL, and what they are shown with the first password.

Shared by the daemon (the terminal that started it) and the CLI (`picoagent passwd --show-initial`,
`picoagent status`), so the words and the URL are the same everywhere.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from appliance.channels.web.certificate import SiteCertificate


def site_url(host: str, port: int, *, scheme: str = "http") -> str:
    """The URL people open: the host name's .local name when listening on every interface."""
    shown = host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if not host or (address is not None and address.is_unspecified):
        shown = socket.gethostname().split(".")[0].lower() + ".local"
    elif address is not None and address.version == 6:
        shown = f"[{host}]"
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{shown}" + ("" if port == default else f":{port}")


def certificate_lines(certificate: SiteCertificate, url: str) -> list[str]:
    """How to know the appliance is itself: its public key's fingerprint, and curl pinned to it."""
    return [
        f"  certificate (self-signed) public key SHA-256: {certificate.fingerprint}",
        "    the browser warns once: compare this with its certificate details (Public Key fingerprint)",
        f"    curl: {certificate.curl_command(url.rstrip('/') + '/healthz')}",
    ]


def first_password_text(password: str, kept: Path, url: str, certificate: SiteCertificate | None = None) -> str:
    """The first password, where it is kept, and where to use it (for a terminal, never a log)."""
    lines = [
        f"picoagent: the one-time web password is {password}",
        f"  open {url} and sign in with it: the setup page asks for your own (or `picoagent passwd`)",
        f"  until then `picoagent passwd --show-initial` shows it again (kept in {kept}, mode 0600)",
    ]
    if certificate is not None:
        lines += certificate_lines(certificate, url)
    return "\n".join(lines)
