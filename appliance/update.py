"""Where OTA was before ``appliance/ota/`` (issue 34): ``python3 -m appliance.update`` and older boot updaters.

Releases from before ``appliance/ota/`` build the boot-time updater from a new release with their own
list of modules (this file among them) and ``from appliance.update import main``; that list has no
``ota/``, so in such a zip the import below fails and says why: the device keeps its older boot-time
updater (it reads the same layout and journal: ota/layout.py) until the next update, which this
release's updater applies (ota/boot_updater.py). The code is in ``appliance/ota/``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

try:
    from appliance.ota import cli
except ModuleNotFoundError as exc:  # only in a boot-time updater zipped by a release before ota/
    if exc.name != "appliance.ota":
        raise
    raise SystemExit(
        "this release's updater is in appliance/ota/, which an updater from before it does not zip: "
        "the boot-time updater in place stays (it reads this release's unchanged layout and journal) "
        "until the next update brings the new one"
    ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m appliance.update``: the same command as ``python3 -m appliance.ota``."""
    return cli.main(argv, prog="python3 -m appliance.update")


if __name__ == "__main__":
    sys.exit(main())
