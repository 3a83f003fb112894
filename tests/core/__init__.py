"""The core: errors, settings, redaction and the linear time of every pass over untrusted text."""
