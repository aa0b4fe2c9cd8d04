"""picoagent: a private AI assistant that lives on a Raspberry Pi."""

__version__ = "0.1.0"
