"""Fakes for the appliance's boundaries that speak the real protocols (shared by tests)."""
