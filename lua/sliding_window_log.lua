-- sliding_window_log.lua: the reference sliding-window log limiter that RL.SLIDELOG
-- replaces, on the same sorted set. Written from the seed post "Building a Sliding
-- Window Rate Limiter for a Video API With Redis" (its sliding_window_log.lua), with
-- the same KEYS/ARGV and the same behaviour; tests/lua_compat.rs runs it against the
-- module on shared keys.
--
-- KEYS[1] = rate limit key (a sorted set)
-- ARGV[1] = now (unix microseconds)
-- ARGV[2] = window (microseconds)
-- ARGV[3] = limit (max requests in window)
-- ARGV[4] = unique member id for this request: "<now>:<8 lowercase hex>"
-- Returns {allowed, remaining}.

local key    = KEYS[1]
local now    = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit  = tonumber(ARGV[3])
local member = ARGV[4]

-- 1. drop everything outside the trailing window
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)

-- 2. how many requests are left inside the window
local count = redis.call('ZCARD', key)

if count < limit then
  -- 3. admit: record this request
  redis.call('ZADD', key, now, member)
  -- 4. let the key expire once the window fully drains
  redis.call('PEXPIRE', key, math.ceil(window / 1000))
  return {1, limit - count - 1}  -- allowed, remaining
else
  redis.call('PEXPIRE', key, math.ceil(window / 1000))
  return {0, 0}                  -- denied, remaining 0
end
