"""A device definition that is not in the config yet (``POST /api/devices/try``), checked as the config's own.

The definition has the shape of a ``devices.NAME`` entry. It is built by the loader's code (unknown keys,
wrong types and unknown drivers refused as in the file) and then checked by the loader's checks with the
configured devices beside it, under a name no configured device has, so what the file would refuse is
refused here in the same words: a pin another device uses, an address out of range or taken, a key the
driver needs. The error names the definition's own field (``pin``, ``address``), not the stand-in name.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from appliance.config.checks import _check
from appliance.config.devices import DeviceConfig
from appliance.config.edit import FieldError, key_of
from appliance.config.load import _build
from appliance.config.schema import Config
from appliance.errors import ConfigError

STAND_IN = "new_device"  # the name the definition is checked under (numbered when a device has it already)


def _stand_in(config: Config) -> str:
    return next(name for n in range(1, len(config.devices) + 2) if (name := f"{STAND_IN}_{n}") not in config.devices)


def check_definition(config: Config, entry: Mapping[str, Any]) -> DeviceConfig:
    """The device ``entry`` defines, checked as if it were added to ``config``; a FieldError names the field."""
    name = _stand_in(config)
    prefix = f"devices.{name}."
    try:
        # lookup None: a ${NAME} in a definition stays as written, never resolved to a secret's value
        device: DeviceConfig = _build(DeviceConfig, dict(entry), prefix, None, set())
        trial = copy.copy(config)  # the same tree, with one more device; the config itself is not changed
        trial.devices = {**config.devices, name: device}  # last: a clash is reported on the new device
        _check(trial, set())
    except ConfigError as exc:
        key = key_of(exc)
        if not key.startswith(prefix):
            raise  # not about the definition (an event or a job that names devices): the message says which
        field = key.removeprefix(prefix)
        raise FieldError(field, exc.message.replace(prefix, "", 1), fix=exc.fix) from None
    return device
