"""MQTT: the broker link (link.py) and Home Assistant discovery of picoagent's devices and itself (discovery.py,
bridge.py). Imported only when ``mqtt.enabled`` is true: nothing here loads in a daemon without a broker."""
