"""What the HTTP service refuses and survives: keys, the answer cap, the rate limit (one process,
Redis, a fleet), bodies and connections, faults and bad input."""
