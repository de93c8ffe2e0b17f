"""agent-failover: failover and graceful degradation for multi-agent LLM pipelines on Temporal."""
