"""Hardware: buses, backends, drivers and named devices.

Bottom up: the bus interfaces and the real buses (buses.py); where pins and buses come from, real or
simulated (backends.py, with the simulated chips and buses in sim/); one driver module per part, each
registered by one line in the driver table (drivers/); and the named devices built from the config on
top of them (devices.py), with approvals, the raw-bus policy and events beside them.
"""
