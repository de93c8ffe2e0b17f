"""LLM wire adapters: Anthropic Messages, OpenAI Chat Completions (and compatibles), Gemini,
Bedrock Converse, and the same wires on Azure and Vertex AI.

Every call makes exactly one attempt over one shared ``httpx.AsyncClient`` and turns
every way it can fail into one typed error from :mod:`resilience.errors`, so the layers
above never see a vendor exception or a raw status code. Retrying is Temporal's job,
choosing the next route is :mod:`resilience`'s.

The contract is :class:`providers.wire.WireAdapter`: a vendor module says only how its
wire is spoken (headers and auth header, body, URL, reading a JSON reply, folding a
stream, its in-band error signals). One pipeline does the rest for all of them
(:mod:`providers.pipeline`, with :mod:`providers.base` for the attempt's HTTP steps and
:mod:`providers.pump` for streams), and classification happens once, in
:mod:`providers.classify`. :mod:`providers.registry` picks the adapter by
``(cloud, provider)`` and is the entry point (``registry.complete``).

Adding a provider
-----------------
1. One file, ``providers/<vendor>.py``: a class implementing
   :class:`~providers.wire.WireAdapter` (subclass it for the defaults of ``prefix`` and
   ``check``; subclass an existing adapter when only the URL or the auth differs, as
   :mod:`providers.azure` and :mod:`providers.vertex` do), its
   :class:`~providers.wire.StreamState`, and a module-level instance.
2. One line in :data:`providers.registry.ADAPTERS`: ``(cloud, ProviderKind.X): x.WIRE``
   (plus the new :class:`~resilience.endpoint.ProviderKind` member when the wire is new).

Nothing else changes: budgets, size bounds, signing, redaction and error classification
apply to the new wire as they are. A vendor whose HTTP errors have spellings of their own
adds them to :mod:`providers.vendor_hints`, where every route reads them.
"""
