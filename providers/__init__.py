"""LLM wire adapters: Anthropic Messages, OpenAI Chat Completions (and compatibles), Gemini.

Every adapter makes exactly one attempt over one shared ``httpx.AsyncClient`` and turns
every way a call can fail into one typed error from :mod:`resilience.errors`, so the
layers above never see a vendor exception or a raw status code. Retrying is Temporal's
job, choosing the next route is :mod:`resilience`'s.
"""
