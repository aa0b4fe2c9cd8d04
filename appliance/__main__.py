"""`python -m appliance` runs the `picoagent` command."""

import sys

from appliance.cli import main

sys.exit(main())
