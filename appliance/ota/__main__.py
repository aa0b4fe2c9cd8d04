"""``python3 -m appliance.ota``: the updater's command line (ota/cli.py)."""

import sys

from appliance.ota.cli import main

sys.exit(main())
