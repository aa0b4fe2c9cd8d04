"""picoagent: a private AI assistant that lives on a Raspberry Pi.

Where each concern lives (one package each; README "Layout" has every module, tests/test_layers.py the
layers and the one-hop test): ``channels/`` every way to chat (the ChatChannel contract, commands,
pairing, the platforms, the web); ``understanding/`` what a message means before any model (rules, meaning,
schedule words and times, difficulty, tool ranking, the ask-back store); ``grounded/`` answers from what
the appliance knows; ``agent/`` the turn (routing, the local and cloud models, acting on what was
understood); ``schedule/`` the cron scheduler and the heartbeat; ``tasks/`` persistent tasks; ``mqtt/``
Home Assistant discovery, commands and chat over MQTT (the broker link: ``hardware/remote/``); ``ota/``
updates over the air; ``daemon.py`` composes the services, ``cli/`` is the ``picoagent`` command.
"""

import json
import sys
from pathlib import Path


def _release_version(default: str) -> str:
    """The installed release's version (``<release>/.release.json`` beside the venv), else the package's."""
    try:
        version = json.loads((Path(sys.prefix).parent / ".release.json").read_text())["version"]
        return str(version)
    except (OSError, ValueError, KeyError, TypeError):
        return default


__version__ = _release_version("0.1.0")
