"""The ``failover`` command line: dev stack, demo, pipeline runs, health status, simulator."""
