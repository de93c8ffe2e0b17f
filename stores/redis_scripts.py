"""The health store's Lua scripts, registered once per client.

Every script declares the route's breaker key (``KEYS[1]``) and derives the route's other
keys from ``ARGV[1]``, its key prefix ``NS:h:{route}:`` (:mod:`stores.redis_keys`): they
share the hash tag, so they are in the declared key's slot and the scripts run on Redis
Cluster. Merging is server-side: a window comes back as one ``field=count,...`` string
(:func:`merged_fields`), so the client parses a few dozen counters whatever the traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

# KEYS[1] breaker hash; ARGV[1] expected version; ARGV[2] new version; ARGV[3] JSON;
# ARGV[4] TTL in ms, 0 for none (a forced breaker). A missing hash has version 0, so
# expected=0 doubles as "set if absent".
CAS_LUA = """
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'b', ARGV[3])
if ARGV[4] == '0' then redis.call('PERSIST', KEYS[1])
else redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"""

# The merge helpers every reading script starts with. Deriving keys from the prefix means
# a call sends a few short arguments instead of one key name per second of window.
MERGE_LUA = """
-- One "field=count,field=count" bulk string: the client splits it in one call instead of
-- parsing hundreds of RESP elements in Python (the pure-Python parser costs ~10 us each).
local function flat(acc)
  local out = {}
  for k, v in pairs(acc) do out[#out + 1] = k .. '=' .. v end
  return table.concat(out, ',')
end
-- Sum the buckets prefix..part..(newest - i) for i < max(n1, n2) into two windows: the
-- newest n1 and the newest n2 buckets.
local function merge2(prefix, part, newest, n1, n2)
  local a, b = {}, {}
  for i = 0, math.max(n1, n2) - 1 do
    local f = redis.call('HGETALL', prefix .. part .. (newest - i))
    for j = 1, #f, 2 do
      local v = tonumber(f[j + 1])
      if i < n1 then a[f[j]] = (a[f[j]] or 0) + v end
      if i < n2 then b[f[j]] = (b[f[j]] or 0) + v end
    end
  end
  return flat(a), flat(b)
end
"""

# Read one route for a snapshot. KEYS: breaker. ARGV: prefix, newest second, seconds in
# the window, how many recent entries to return, newest histogram bucket, how many.
# Returns {breaker JSON or nil, probe at, probe ok, last call at, context window,
#          recent entries joined by ';', merged counts, merged histograms}.
READ_LUA = (
    MERGE_LUA
    + """
local p = ARGV[1]
local probe = redis.call('HMGET', p .. 'p', 'at', 'ok', 'c')
local w = merge2(p, 's:', tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
local recent = redis.call('LRANGE', p .. 'r', 0, tonumber(ARGV[4]) - 1)
local h = merge2(p, 'h:', tonumber(ARGV[5]), tonumber(ARGV[6]), 0)
return {redis.call('HGET', KEYS[1], 'b'), probe[1], probe[2], probe[3],
        redis.call('GET', p .. 'cw'), table.concat(recent, ';'), w, h}
"""
)

# The breaker and its two windows. KEYS: breaker. ARGV: prefix, newest second, seconds of
# the error window, of the semantic window, newest histogram bucket, how many.
BREAKER_READ_LUA = (
    MERGE_LUA
    + """
local e, s = merge2(ARGV[1], 's:', tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
local h = merge2(ARGV[1], 'h:', tonumber(ARGV[5]), tonumber(ARGV[6]), 0)
return {redis.call('HGET', KEYS[1], 'b'), e, s, h}
"""
)

# The short baseline's minute buckets summed. KEYS: breaker. ARGV: prefix, newest minute,
# how many minutes.
SUM_LUA = (
    MERGE_LUA
    + """
local a = merge2(ARGV[1], 'm:', tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
return a
"""
)

# A route's cost efficiency. KEYS: breaker. ARGV: prefix, newest minute, how many minutes.
# Returns {current window's cost counters merged, cached baseline or nil, verdict or nil}.
COST_READ_LUA = (
    MERGE_LUA
    + """
local a = merge2(ARGV[1], 'cm:', tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
return {a, redis.call('GET', ARGV[1] .. 'cb'), redis.call('GET', ARGV[1] .. 'cv')}
"""
)

# Every hourly bucket of the long horizon in one round trip (run at most every
# baseline_refresh_s). KEYS: the bucket hashes. Returns one "bin=count,..." string per key.
HOURLY_LUA = (
    MERGE_LUA
    + """
local out = {}
for i, k in ipairs(KEYS) do
  local f = redis.call('HGETALL', k)
  local acc = {}
  for j = 1, #f, 2 do acc[f[j]] = f[j + 1] end
  out[i] = flat(acc)
end
return out
"""
)

# Count one outcome and read what the breaker needs, atomically, in one round trip.
# KEYS: breaker. ARGV: 1 prefix, 2 at, 3 ttl ms, 4 is probe, 5 probe ok, 6 hour,
#   7 hourly bin or '', 8 hourly ttl ms (also the breaker's idle TTL, renewed here),
#   9 minute, 10 minute bin or '', 11 bucket ttl ms,
#   12 recent entry or '', 13 recent cap, 14 second, 15 error-window seconds,
#   16 semantic-window seconds, 17 nonce, 18 histogram bucket, 19 histogram buckets of
#   the error window, 20 billed attempts (0 or 1), 21 useful tokens, 22 nano-dollars
#   spent (the cost counters, :mod:`resilience.cost_efficiency`), 23 how many count pairs
#   follow, 24.. field, increment pairs: the counts for the second's bucket, then the
#   bins for the histogram bucket.
# Returns {breaker JSON or nil, error-window counts, semantic-window counts,
#          error-window histograms, baseline or nil}.
RECORD_LUA = (
    MERGE_LUA
    + """
local p = ARGV[1]
local nonces = p .. 'n:' .. ARGV[9]
if redis.call('SADD', nonces, ARGV[17]) == 1 then
  redis.call('PEXPIRE', nonces, ARGV[11])
  local split = 24 + 2 * tonumber(ARGV[23])
  if split > 24 then
    local bucket = p .. 's:' .. ARGV[14]
    for i = 24, split - 1, 2 do redis.call('HINCRBY', bucket, ARGV[i], ARGV[i + 1]) end
    redis.call('PEXPIRE', bucket, ARGV[11])
  end
  if #ARGV >= split then
    local hist = p .. 'h:' .. ARGV[18]
    for i = split, #ARGV, 2 do redis.call('HINCRBY', hist, ARGV[i], ARGV[i + 1]) end
    redis.call('PEXPIRE', hist, ARGV[11])
  end
  if ARGV[4] == '1' then
    redis.call('HSET', p .. 'p', 'at', ARGV[2], 'ok', ARGV[5])
  else
    local last = tonumber(redis.call('HGET', p .. 'p', 'c') or '-1')
    if tonumber(ARGV[2]) > last then redis.call('HSET', p .. 'p', 'c', ARGV[2]) end
  end
  redis.call('PEXPIRE', p .. 'p', ARGV[3])
  if ARGV[7] ~= '' then
    redis.call('HINCRBY', p .. 'lh:' .. ARGV[6], ARGV[7], 1)
    redis.call('PEXPIRE', p .. 'lh:' .. ARGV[6], ARGV[8])
  end
  if ARGV[10] ~= '' then
    redis.call('HINCRBY', p .. 'm:' .. ARGV[9], ARGV[10], 1)
    redis.call('PEXPIRE', p .. 'm:' .. ARGV[9], ARGV[11])
  end
  if ARGV[20] == '1' then
    for _, k in ipairs({p .. 'cm:' .. ARGV[9], p .. 'ch:' .. ARGV[6]}) do
      redis.call('HINCRBY', k, 'b', 1)
      redis.call('HINCRBY', k, 'k', ARGV[21])
      redis.call('HINCRBY', k, 'n', ARGV[22])
    end
    redis.call('PEXPIRE', p .. 'cm:' .. ARGV[9], ARGV[11])
    redis.call('PEXPIRE', p .. 'ch:' .. ARGV[6], ARGV[8])
  end
  if ARGV[12] ~= '' then
    redis.call('LPUSH', p .. 'r', ARGV[12])
    redis.call('LTRIM', p .. 'r', 0, tonumber(ARGV[13]) - 1)
    redis.call('PEXPIRE', p .. 'r', ARGV[3])
  end
end
-- A route still seen keeps its breaker (a forced one, without a TTL, keeps none).
if redis.call('PTTL', KEYS[1]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[8]) end
local e, s = merge2(p, 's:', tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16]))
local h = merge2(p, 'h:', tonumber(ARGV[18]), tonumber(ARGV[19]), 0)
return {redis.call('HGET', KEYS[1], 'b'), e, s, h, redis.call('GET', p .. 'base')}
"""
)


async def reload_script(script: AsyncScript) -> None:
    """Load ``script`` into its server again (a restarted or flushed one answered
    NOSCRIPT to an ``EVALSHA`` sent in a pipeline, where redis-py does not reload it)."""
    script.sha = await script.registered_client.script_load(script.script)


def merged_fields(blob: bytes) -> dict[str, int]:
    """A merged window as the merge scripts return it: ``b"c=3,e=1,l120=2"``."""
    if not blob:
        return {}
    out = {}
    for kv in blob.decode().split(","):
        k, _, v = kv.partition("=")
        out[k] = int(v)
    return out


@dataclass(frozen=True)
class HealthScripts:
    """The scripts above, registered on one client (each call is an ``EVALSHA``)."""

    cas: AsyncScript
    read: AsyncScript
    breaker_read: AsyncScript
    sum: AsyncScript
    record: AsyncScript
    hourly: AsyncScript
    cost_read: AsyncScript

    @classmethod
    def register(cls, client: aioredis.Redis) -> HealthScripts:
        """Register every script on ``client``."""
        return cls(
            cas=client.register_script(CAS_LUA),
            read=client.register_script(READ_LUA),
            breaker_read=client.register_script(BREAKER_READ_LUA),
            sum=client.register_script(SUM_LUA),
            record=client.register_script(RECORD_LUA),
            hourly=client.register_script(HOURLY_LUA),
            cost_read=client.register_script(COST_READ_LUA),
        )
