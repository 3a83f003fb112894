"""The citation contract: the finalizer, live numbering and the model's own Sources list."""
