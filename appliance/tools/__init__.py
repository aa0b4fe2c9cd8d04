"""Tools the model may call: typed functions in a registry; failures become results."""
