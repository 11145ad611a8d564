-- fixed_window.lua: the reference fixed-window limiter that RL.FIXED replaces, on the
-- same counter "<key>:<window start in seconds>". Written from the seed page "Rate
-- Limiting: Fixed Window vs Sliding Window" (its fixedWindowScript): winStart =
-- nowSec - (nowSec % windowSec), INCR first, EXPIRE windowSec * 2 on the first count.
-- Like the seed it increments before comparing, so a denied request is counted too
-- (RL.FIXED does not count it; for cost 1 every decision is the same). It returns the
-- seed post's {allowed, remaining} rather than the lab's {allowed, count, reset}.
--
-- KEYS[1] = base key, e.g. rl:fixed (the counter is KEYS[1] .. ':' .. winStart)
-- ARGV[1] = now (unix time, whole seconds)
-- ARGV[2] = window (seconds)
-- ARGV[3] = limit
-- Returns {allowed, remaining} with remaining = max(0, limit - count).

local now       = tonumber(ARGV[1])
local windowSec = tonumber(ARGV[2])
local limit     = tonumber(ARGV[3])

local winStart = now - (now % windowSec)
local key      = KEYS[1] .. ':' .. winStart

local count = redis.call('INCR', key)
if count == 1 then
  redis.call('EXPIRE', key, windowSec * 2)
end

local remaining = math.max(0, limit - count)
if count > limit then
  return {0, remaining}
end
return {1, remaining}
