"""A provider simulator: a real HTTP server on loopback speaking the Anthropic, OpenAI and
Gemini wire formats, with fault injection per endpoint and a log of every attempt.
"""
