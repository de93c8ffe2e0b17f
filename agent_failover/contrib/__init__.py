"""Optional integrations with agent frameworks; each module imports its framework on use.

* :mod:`agent_failover.contrib.pydantic_ai` — a PydanticAI ``Model`` (``FailoverModel``)
  and ``FailoverTemporalAgent``: a ``TemporalAgent`` whose model requests run through
  ``resilient_complete`` in workflow code (extra ``[pydantic-ai]``);
* :mod:`agent_failover.contrib.openai_agents` — an OpenAI Agents SDK ``ModelProvider`` and
  ``FailoverRunner`` (extra ``[openai-agents]``).

Nothing in the core imports this package: ``import agent_failover`` never pulls a framework in.
"""

#: Nothing at this level: each integration is its own submodule, with its own ``__all__``.
__all__: list[str] = []
