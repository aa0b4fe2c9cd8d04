"""Where the boot-time updater's writer was before ``appliance/ota/`` (issue 34); it is ota/boot_updater.py.

Kept at its old path because releases from before ``appliance/ota/`` zip it into the boot-time updater
(appliance/update.py says what happens then). ``python3 -m appliance.boot_updater`` still writes it.
"""

import sys

from appliance.ota.boot_updater import BootUpdaterError, install, main, target

__all__ = ["BootUpdaterError", "install", "main", "target"]

if __name__ == "__main__":
    sys.exit(main())
