"""What the appliance knows without the model: grounded answers (see :mod:`appliance.grounded.base`)."""
