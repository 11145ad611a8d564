-- gcra.lua: the GCRA script RL.GCRA replaces, for the benchmark only (the seeds have
-- no GCRA script; this is the usual one, on RL.GCRA's layout). A string at KEYS[1]
-- holds the theoretical arrival time (TAT) in integer microseconds and expires when it
-- is reached. Integer interval only (the module also handles fractional ones).
--
-- KEYS[1] = limiter key
-- ARGV[1] = now (unix microseconds)
-- ARGV[2] = emission interval (microseconds, window / limit)
-- ARGV[3] = burst (how many may arrive at once)
-- Returns {allowed, remaining, retry_after_ms, reset_after_ms}, as RL.GCRA does.

local now       = tonumber(ARGV[1])
local interval  = tonumber(ARGV[2])
local burst     = tonumber(ARGV[3])
local tolerance = interval * burst

local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local new_tat = tat + interval

if new_tat - now > tolerance then
  return {0, 0, math.ceil((new_tat - tolerance - now) / 1000), math.ceil((tat - now) / 1000)}
end

local ahead_ms = math.ceil((new_tat - now) / 1000)
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ahead_ms)
return {1, math.floor((tolerance - (new_tat - now)) / interval), 0, ahead_ms}
