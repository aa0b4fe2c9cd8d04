"""Where the updater's command line was before ``appliance/ota/`` (issue 34); it is ota/cli.py.

Kept at its old path because releases from before ``appliance/ota/`` zip it into the boot-time updater
(appliance/update.py says what happens then).
"""

from appliance.ota.cli import add_arguments, main, run

__all__ = ["add_arguments", "main", "run"]
