"""Client quotas: configuration with Kafka's precedence, sliding-window rates, throttle times."""
