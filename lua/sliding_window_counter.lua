-- sliding_window_counter.lua: the reference sliding-window counter limiter that
-- RL.SLIDECOUNT replaces, on the same two string counters. Written from the seed post
-- "Building a Sliding Window Rate Limiter for a Video API With Redis" (its
-- sliding_window_counter.lua), with the same KEYS/ARGV and the same float arithmetic:
-- estimated = curr + math.floor(prev * (1 - elapsed)). The module computes the same
-- estimate in integers, which can differ by one where the float product falls just
-- below a whole number; tests/lua_compat.rs shows both.
--
-- The caller (the seed's PHP) computes, with now = microtime(true) in seconds:
--   i = floor(now / window), elapsed = (now - i * window) / window
-- KEYS[1] = current window counter key  "<key>:<i>"
-- KEYS[2] = previous window counter key "<key>:<i-1>"
-- ARGV[1] = limit
-- ARGV[2] = elapsed ratio in current window (0.0 - 1.0)
-- ARGV[3] = window in seconds (the counter lives for two windows)
-- Returns {allowed, remaining}.

local curr    = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev    = tonumber(redis.call('GET', KEYS[2]) or '0')
local limit   = tonumber(ARGV[1])
local elapsed = tonumber(ARGV[2])
local ttl     = tonumber(ARGV[3])

local estimated = curr + math.floor(prev * (1 - elapsed))

if estimated < limit then
  local newCount = redis.call('INCR', KEYS[1])
  if newCount == 1 then
    -- keep two windows worth of data so the previous key survives
    redis.call('EXPIRE', KEYS[1], ttl * 2)
  end
  return {1, limit - estimated - 1}
else
  return {0, 0}
end
