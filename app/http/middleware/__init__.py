"""What runs around every route: the body limits, API keys and rate limits (in the process or
shared in Redis), the answer cap and the metrics."""

__all__: list[str] = []
