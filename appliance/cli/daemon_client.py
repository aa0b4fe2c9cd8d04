"""The running daemon, asked over HTTP as the local CLI (urllib: no aiohttp in a command).

The daemon writes where it listens (daemon.json) and a token for the local CLI (cli.token, 0600) into its
data dir. A command asks the daemon first when it owns what the command touches (the model, the devices,
the scheduler); None back means nothing answers, and the command works on its own or says so. When the
daemon serves HTTPS, only its own certificate, read from the same data dir, is trusted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from appliance.config import Config


def daemon_get(
    config: Config, path: str, body: dict[str, Any] | None = None, *, timeout: float = 30, method: str | None = None
) -> Any:
    """GET (or POST ``body`` to, or ``method``) a path of the running daemon as the local CLI; None when nothing
    answers."""
    import urllib.error
    import urllib.request

    from appliance.config import data_dir
    from appliance.daemon import DaemonInfo
    from appliance.errors import PicoagentError

    root = data_dir(config)
    try:
        info = json.loads(DaemonInfo.path(root).read_text())
        token = DaemonInfo.token_path(root).read_text().strip()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise PicoagentError(
            f"cannot read {DaemonInfo.token_path(root)}", fix="run as the picoagent user or with sudo"
        ) from None
    host = "127.0.0.1" if info["host"] in ("0.0.0.0", "::", "") else info["host"]
    scheme = info.get("scheme", "http")
    context = _daemon_tls(root) if scheme == "https" else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    data = json.dumps(body).encode() if body is not None else None
    url = f"{scheme}://{host}:{info['port']}{path}"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())
        except ValueError:
            error = {}
        if isinstance(error, dict) and "error" in error:
            raise PicoagentError(str(error["error"]), fix=error.get("fix")) from None
        raise PicoagentError(f"the daemon answered {exc.code} for {path}") from None
    except (urllib.error.URLError, OSError):
        return None


def _daemon_tls(root: Any) -> Any:
    """An SSL context trusting exactly the daemon's own certificate (in its data dir), host names checked."""
    from appliance.channels.web.certificate import folder, read_certificate
    from appliance.errors import PicoagentError

    try:
        certificate = read_certificate(root)
    except PermissionError:
        raise PicoagentError(f"cannot read {folder(root)}", fix="run as the picoagent user or with sudo") from None
    if certificate is None:
        raise PicoagentError(
            f"the daemon serves HTTPS, but its certificate is not in {folder(root)}",
            fix="restart it (`systemctl restart picoagent`): it makes a new one",
        )
    return certificate.client_context()
