"""Links to the services devices live in when they are not wired to the Pi: Home Assistant (hass.py) and an
MQTT broker (mqtt.py, which the Home Assistant discovery in appliance/mqtt/ publishes through too).

A link is to a remote device what a bus is to a chip: the drivers in ``hardware/drivers/`` reach it
through ``Buses.link(name)``, and whoever opens the devices puts it in ``Backend.links`` first. Nothing
here is imported unless its config section is enabled.
"""
