"""Updates over the air, all of it: one package, imported by nothing the idle daemon runs.

- ``bundle.py``        the signed bundle: its manifest, writing it (firmware_tools) and checking it (the device)
- ``layout.py``        where releases, ``current``, the journal and the trusted keys are on a device
- ``updater.py``       verify, stage, switch, health-check, roll back, recover (the ``Updater``)
- ``health.py``        what "healthy after a switch" means: /healthz with the new version, systemd READY
- ``database.py``      the database copy before a switch, put back when switching away from an upgrade
- ``cli.py``           ``picoagent update`` and ``python3 -m appliance.ota``
- ``boot_updater.py``  the root-owned zip picoagent-update-boot.service runs, and who may write it

Everything here uses only the standard library, ``cryptography`` and ``appliance/{__init__,errors,fileio}.py``:
the boot-time updater is a zip of exactly that (boot_updater.py). ``appliance/update.py``,
``update_cli.py``, ``bundle.py`` and ``boot_updater.py`` are where this lived before; they stay for the
boot-time updaters that releases before this one build (boot_updater.py says why).
"""
