"""OpenTelemetry setup and the names of every instrument agent-failover emits."""
