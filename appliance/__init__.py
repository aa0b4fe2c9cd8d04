"""picoagent: a private AI assistant that lives on a Raspberry Pi."""

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
