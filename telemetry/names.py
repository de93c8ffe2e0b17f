"""Instrument, span and event names, in one place so dashboards and code agree.

The GenAI client metrics and attributes come from ``opentelemetry-semantic-conventions``
(re-exported here, never hand-written); the ``failover.*`` names are this project's.
Durations are in seconds, as the GenAI conventions and Prometheus expect.
"""

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _genai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as _genai_metrics
from opentelemetry.semconv.attributes import error_attributes as _error

METER_NAME = "agent_failover"
TRACER_NAME = "agent_failover"

# -- GenAI semantic conventions (attribute keys and metric names) ------------------------
GEN_AI_OPERATION_NAME = _genai.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME = _genai.GEN_AI_PROVIDER_NAME
GEN_AI_REQUEST_MODEL = _genai.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL = _genai.GEN_AI_RESPONSE_MODEL
GEN_AI_USAGE_INPUT_TOKENS = _genai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS = _genai.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_RESPONSE_FINISH_REASONS = _genai.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_TOKEN_TYPE = _genai.GEN_AI_TOKEN_TYPE
GEN_AI_REQUEST_MAX_TOKENS = _genai.GEN_AI_REQUEST_MAX_TOKENS
GEN_AI_AGENT_NAME = _genai.GEN_AI_AGENT_NAME
ERROR_TYPE = _error.ERROR_TYPE
#: The ``gen_ai.operation.name`` of a chat completion.
OPERATION_CHAT = _genai.GenAiOperationNameValues.CHAT.value
#: The ``gen_ai.operation.name`` of one resilient call (an agent role invoked).
OPERATION_INVOKE_AGENT = _genai.GenAiOperationNameValues.INVOKE_AGENT.value

#: Histogram (s): duration of one model call attempt (GenAI client metric).
GEN_AI_CLIENT_OPERATION_DURATION = _genai_metrics.GEN_AI_CLIENT_OPERATION_DURATION
#: Histogram ({token}): input and output tokens per attempt (GenAI client metric).
GEN_AI_CLIENT_TOKEN_USAGE = _genai_metrics.GEN_AI_CLIENT_TOKEN_USAGE
#: Histogram (s): time to the first streamed chunk (GenAI client metric).
GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK = _genai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK

# -- failover attributes ---------------------------------------------------------------
ATTR_ROLE = "failover.role"
ATTR_TIER = "failover.tier"
ATTR_ROUTE = "failover.route"
ATTR_ATTEMPT = "failover.attempt"
ATTR_REASON_CODES = "failover.reason_codes"
ATTR_HEDGE = "failover.hedge"
ATTR_OUTCOME = "failover.outcome"
ATTR_CAPABILITY = "failover.capability"

# -- failover metrics --------------------------------------------------------------------
#: Counter: model call attempts, attributes route, role, outcome (ok or error class).
ATTEMPTS = "failover.attempts"
#: Counter: substitutions (an attempt failed and the call moved on), attributes role,
#: from_tier, to_tier, reason.
SUBSTITUTIONS = "failover.substitutions"
#: Counter: answers, attributes role, tier, capability (full/degraded/static).
ANSWERS = "failover.answers"
#: Histogram: attempts it took to answer one call (1 = the first route answered).
CASCADE_DEPTH = "failover.cascade.depth"
#: Observable gauge: breaker state per route (0 closed, 1 half-open, 2 open).
BREAKER_STATE = "failover.breaker.state"
#: Counter: breaker transitions, attributes route, from, to, reason.
BREAKER_TRANSITIONS = "failover.breaker.transitions"
#: Histogram (s): from a breaker opening to its closing again, attribute route.
RESTORATION_TIME = "failover.restoration.duration"
#: Counter: semantic validation of answers, attributes route, result (pass/fail).
VALIDATIONS = "failover.validations"
#: Counter: hedges, attributes role, event (fired/won/cancelled).
HEDGES = "failover.hedges"
#: Counter: health probes, attributes route, ok.
PROBES = "failover.probes"
#: Counter: probe rounds that sent nothing (recent real traffic, open, cooling down),
#: attributes route, reason.
PROBES_SKIPPED = "failover.probes.skipped"
CACHE_LOOKUPS = "failover.cache.lookups"
#: Histogram (s): age of the cached answers served.
CACHE_AGE = "failover.cache.age"
#: Counter: compensations, attribute outcome (run/failed).
COMPENSATIONS = "failover.compensations"
#: Counter: escalations, attribute event (opened/resolved), action.
ESCALATIONS = "failover.escalations"
#: Counter: store degradations (shared store unreachable), attributes store.
STORE_DEGRADED = "failover.store.degraded"
#: Counter: runs that skipped their search-attribute upserts (the namespace lacks them),
#: attributes namespace.
SEARCH_ATTRIBUTES_SKIPPED = "failover.search_attributes.skipped"
#: Counter (USD): cost of answered attempts, attributes route, role.
COST = "failover.cost"

#: Counter: shadow-evaluation samples (a route's answer graded against the reference),
#: attributes role, route, agreed (score >= the scorer's pass threshold).
SHADOW_SAMPLES = "failover.shadow.samples"
#: Histogram (1): agreement of a shadowed answer with the reference route, 0..1.
SHADOW_AGREEMENT = "failover.shadow.agreement"
#: Counter: quality verdict changes, attributes role, route, event (regressed/restored).
QUALITY_REGRESSIONS = "failover.quality.regressions"
#: Counter: calls refused by a shared rate budget before they reached the provider,
#: attributes scope (the refusing bucket, ``endpoint:<route>`` or ``bulkhead:<name>``),
#: route, bulkhead (the role's), role.
RATE_BUDGET_REFUSALS = "failover.rate_budget.refusals"
#: Counter: calls that found every one of the worker's own connection slots to a route
#: busy (``local_saturation``: never counted against the route); attributes route,
#: bulkhead (whose slots), role.
LOCAL_SATURATIONS = "failover.local_saturations"
#: Counter: degraded re-runs, attributes role, status (revised/escalated/expired/failed).
RERUNS = "failover.reruns"

# -- span events -------------------------------------------------------------------------
EV_SUBSTITUTION = "failover.substitution"
EV_BREAKER_TRANSITION = "failover.breaker.transition"
EV_SLA_DEMOTED = "failover.sla.demoted"
EV_SLA_RESTORED = "failover.sla.restored"
EV_QUALITY_REGRESSION = "failover.quality.regression"
EV_QUALITY_RESTORED = "failover.quality.restored"
EV_RERUN = "failover.rerun"
EV_RATE_BUDGET_REFUSED = "failover.rate_budget.refused"
EV_LOCAL_SATURATION = "failover.local_saturation"
EV_HEDGE_FIRED = "failover.hedge.fired"
EV_HEDGE_WON = "failover.hedge.won"
EV_HEDGE_CANCELLED = "failover.hedge.cancelled"
EV_CACHE_SERVED = "failover.cache.served"
EV_STATIC_SERVED = "failover.static.served"
EV_ESCALATION_OPENED = "failover.escalation.opened"
EV_ESCALATION_RESOLVED = "failover.escalation.resolved"
#: The on-call webhook accepted an escalation notification (one per attempt that did).
EV_ESCALATION_NOTIFIED = "failover.escalation.notified"
#: An attempt to notify the on-call webhook failed (Temporal retries it unless rejected).
EV_ESCALATION_NOTIFY_FAILED = "failover.escalation.notify_failed"
EV_COMPENSATION_RUN = "failover.compensation.run"
EV_COMPENSATION_FAILED = "failover.compensation.failed"
