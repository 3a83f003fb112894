"""The HTTP service: each protocol through real clients, feedback, metrics, workers and a fleet."""
