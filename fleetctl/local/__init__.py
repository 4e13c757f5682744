"""The local stack: LocalStack in host mode, the template deployed with Stage=local, and local processes."""
