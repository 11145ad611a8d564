-- For redis_exporter's --script option: every numeric field of INFO rl as field/value
-- pairs, which it exports as redis_script_values{key="<field>"} (it skips INFO fields
-- it does not know by name, and the module's are not among them).
local out = {}
for name, value in string.gmatch(redis.call('INFO', 'rl'), '\n(rl_[%w_]+):(%d+)\r') do
  out[#out + 1] = name
  out[#out + 1] = value
end
return out
