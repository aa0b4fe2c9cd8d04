"""MQTT: Home Assistant discovery of picoagent's devices and itself (discovery.py, bridge.py) and the chat
topic (chat.py). The broker link they publish through sits below, with the devices that use it
(appliance/hardware/remote/mqtt.py). Imported only when ``mqtt.enabled`` is true: nothing here loads in a
daemon without a broker."""
