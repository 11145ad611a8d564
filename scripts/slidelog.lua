-- RL.SLIDELOG as a Redis script: generated from scripts/src/lib.lua by make scripts-sync.
-- redis-rl's limiters as Redis Lua scripts: the module's commands, arguments, replies,
-- error texts and key layouts, for servers that cannot load the module.
--
-- Calling convention (every script):
--   EVALSHA <sha> <numkeys> <KEYS...> <ARGV...>
--   ARGV = every argument the module command takes after its name, unchanged
--          (the key included: `RL.FIXED k 10 60 COST 2` is ARGV = k 10 60 COST 2).
--   KEYS = the keys among those arguments, in order: the one key of a limiter
--          command, the key of each limit of RL.ALL (what COMMAND GETKEYS lists).
--   The per-window counters (`<key>:<n>`) are named from the server's time inside the
--   script, so they cannot be declared by the caller; they share the key's slot
--   through its {hash tag}, as the module requires in a cluster.
-- Replies: the module's integers; errors: the module's texts, as error replies.
--
-- Numbers: Lua numbers are doubles, exact for integers below 2^53 (every µs time, limit,
-- cost and window but RL.COUNTER's longest is). Products, nanosecond times and those
-- windows can exceed that: they are computed exactly in a small bignum (base 2^24 limbs)
-- whenever they would. What Redis hands a script, and what a script replies, is a double:
-- past 2^53 (a counter expiring past 2^53 ms since 1970, a reply past 2^53 ms) it is the
-- nearest double, 1 ms off at most (doubles there are 2 apart): a reply read from such an
-- expiry is within 2 ms of the module's.

local floor = math.floor
local B = 16777216 -- 2^24
local TWO53 = 9007199254740992
local MAX_AMOUNT = 1000000000000000
local MAX_WINDOW_MS = 315360000000
-- RL.COUNTER's longest window: i64::MAX µs, in ms (digits: past 2^53).
local MAX_LONG_WINDOW_MS = '9223372036854775'
-- The longest TTL ESCALATE sets (@fastify/rate-limit's bound).
local MAX_ESCALATED_MS = 9007199254740991
local MIN_NOW_US = 94694400000000
local MAX_NOW_US = 9007199254740991
local MAX_LOG_LIMIT = 1000000
local MAX_LIMITS = 16
local MAX_ARGS = 15
local TRIM_BATCH = 1000
local I64_MAX = '9223372036854775807'
-- The latest instant stored as an integer (a GCRA TAT, a block's end): NOW's ceiling
-- plus the longest window or block.
local MAX_END_US = '9322559254740991'
-- The most strikes a block counts (counting stops there).
local MAX_STRIKES = '1000000000000000'
local U64_MAX = '18446744073709551615'

---------------------------------------------------------------------------------------
-- Exact integers: a Lua number when below 2^53, else a table of base-2^24 limbs
-- (least significant first). Every value here is a non-negative integer.

local function tobig(n)
  local t, i = {}, 1
  while n > 0 do
    local q = floor(n / B)
    t[i] = n - q * B
    n = q
    i = i + 1
  end
  return t
end

local function norm(t)
  local n = #t
  while n > 0 and t[n] == 0 do
    t[n] = nil
    n = n - 1
  end
  if n <= 2 then return (t[1] or 0) + (t[2] or 0) * B end
  if n == 3 and t[3] < 32 then return t[1] + t[2] * B + t[3] * B * B end
  return t
end

local function big(x)
  if type(x) == 'number' then return tobig(x) end
  return x
end

local function add(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    local s = a + b
    if s < TWO53 then return s end
  end
  a, b = big(a), big(b)
  local r, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local s = (a[i] or 0) + (b[i] or 0) + carry
    if s >= B then r[i] = s - B; carry = 1 else r[i] = s; carry = 0 end
  end
  if carry > 0 then r[#r + 1] = carry end
  return norm(r)
end

local function cmp(a, b)
  local na, nb = type(a) == 'number', type(b) == 'number'
  if na and nb then
    if a < b then return -1 elseif a > b then return 1 end
    return 0
  end
  if na then return -1 end
  if nb then return 1 end
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

-- a - b for a >= b (a - b when both are numbers, which may be negative).
local function sub(a, b)
  if type(a) == 'number' and type(b) == 'number' then return a - b end
  a, b = big(a), big(b)
  local r, borrow = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - borrow
    if s < 0 then r[i] = s + B; borrow = 1 else r[i] = s; borrow = 0 end
  end
  return norm(r)
end

-- a - b, or 0 if b > a.
local function subsat(a, b)
  if cmp(a, b) <= 0 then return 0 end
  return sub(a, b)
end

local function mul(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    local p = a * b
    if p < TWO53 then return p end
  end
  a, b = big(a), big(b)
  local r = {}
  for i = 1, #a + #b do r[i] = 0 end
  for i = 1, #a do
    local carry, ai = 0, a[i]
    for j = 1, #b do
      local s = r[i + j - 1] + ai * b[j] + carry
      carry = floor(s / B)
      r[i + j - 1] = s - carry * B
    end
    local k = i + #b
    while carry > 0 do
      local s = r[k] + carry
      carry = floor(s / B)
      r[k] = s - carry * B
      k = k + 1
    end
  end
  return norm(r)
end

-- floor(a / d) and a mod d, both numbers below 2^53, d > 0.
local function ndiv(a, d)
  local q = floor(a / d)
  local r = a - q * d
  if r < 0 then q = q - 1; r = r + d elseif r >= d then q = q + 1; r = r - d end
  return q, r
end

-- floor(a / d) and the remainder, for a divisor d below 2^52 (a number).
local function div(a, d)
  if type(a) == 'number' then return ndiv(a, d) end
  local q, r = {}, 0
  if d < 536870912 then
    -- r * 2^24 + limb stays below 2^53: one limb at a time.
    for i = #a, 1, -1 do
      local qi
      qi, r = ndiv(r * B + a[i], d)
      q[i] = qi
    end
  else
    for i = #a, 1, -1 do
      local limb, qi = a[i], 0
      for bit = 23, 0, -1 do
        local p = 2 ^ bit
        local set = limb >= p
        if set then limb = limb - p end
        r = r * 2 + (set and 1 or 0)
        qi = qi * 2
        if r >= d then r = r - d; qi = qi + 1 end
      end
      q[i] = qi
    end
  end
  return norm(q), r
end

local function div_ceil(a, d)
  local q, r = div(a, d)
  if r > 0 then return add(q, 1) end
  return q
end

local function min(a, b) if cmp(a, b) <= 0 then return a end return b end
local function max(a, b) if cmp(a, b) >= 0 then return a end return b end

-- The nearest double (one rounding, as Rust's `as f64`), for values below 2^77.
local tofloat
tofloat = function(a)
  if type(a) == 'number' then return a end
  local hi, lo = div(a, B)
  if type(hi) ~= 'number' then
    local f = 0
    for i = #a, 1, -1 do f = f * B + a[i] end
    return f
  end
  return hi * B + lo
end

-- Decimal text of an exact integer (never Lua's %.14g).
local function str(a)
  if type(a) == 'number' then return string.format('%.0f', a) end
  local parts = {}
  while type(a) ~= 'number' do
    local r
    a, r = div(a, 10000000)
    parts[#parts + 1] = string.format('%07d', r)
  end
  local out = string.format('%.0f', a)
  for i = #parts, 1, -1 do out = out .. parts[i] end
  return out
end

-- Digits (already checked) to an exact integer.
local function fromdigits(s)
  if #s <= 15 then return tonumber(s) end
  local v, i = 0, 1
  local head = #s % 7
  if head > 0 then v = tonumber(string.sub(s, 1, head)); i = head + 1 end
  while i <= #s do
    v = add(mul(v, 10000000), tonumber(string.sub(s, i, i + 6)))
    i = i + 7
  end
  return v
end

-- Whether digit string s (no leading zeros) is at most the digit string m.
local function within(s, m)
  if #s ~= #m then return #s < #m end
  return s <= m
end

---------------------------------------------------------------------------------------
-- Errors: the module's texts.

local function fail(text)
  text = string.gsub(text, '%c', '?')
  error({ rl = string.sub(text, 1, 512) }, 0)
end

local function E_arity(name) fail("ERR wrong number of arguments for '" .. name .. "' command") end
local function E_positive(name, m)
  fail('ERR ' .. name .. ' must be a positive integer no larger than ' .. str(m))
end
local function E_window(longest)
  fail('ERR window must be a positive duration such as 60, 60s or 1500ms, at most ' .. str(longest) .. 'ms')
end
local function E_badnow() fail('ERR NOW must be unix time in microseconds between 1973 and 2255') end
local function E_unknown(o) fail("ERR syntax error: unknown option '" .. o .. "'") end
local function E_repeated(n) fail('ERR syntax error: ' .. n .. ' given more than once') end
local function E_missing(n) fail('ERR syntax error: ' .. n .. ' needs a value') end
local function E_counter_only(n) fail('ERR syntax error: ' .. n .. ' is only accepted by RL.COUNTER') end
local function E_not_in_all(n)
  fail('ERR syntax error: ' .. n .. ' is not accepted in RL.ALL (a denied RL.ALL spends nothing)')
end
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

---------------------------------------------------------------------------------------
-- Arguments, as src/args.rs parses them.

-- A plain decimal number (digits only, at most 20, within u64): a number, math.huge
-- for a valid one of 2^53 or more (every caller's bound is below), nil if invalid.
local function parse_u64(s)
  if s == nil or #s == 0 or #s > 20 or string.find(s, '[^0-9]') then return nil end
  local t = string.gsub(s, '^0+', '')
  if #t <= 15 then return tonumber(s) end
  if not within(t, U64_MAX) then return nil end
  local v = fromdigits(t)
  if type(v) == 'number' then return v end
  return math.huge
end

local function parse_amount(name, s)
  local n = parse_u64(s)
  if n == nil or n < 1 or n > MAX_AMOUNT then E_positive(name, MAX_AMOUNT) end
  return n
end

-- A window of at most `longest` ms (ten years unless given), exact past 2^53.
local function parse_window(s, longest)
  longest = longest or MAX_WINDOW_MS
  local digits, unit = s, 1000
  local last = string.sub(s, -1)
  if not string.find(last, '^[0-9]$') then
    local low = string.lower(s)
    if #s >= 2 and string.sub(low, -2) == 'ms' then
      digits, unit = string.sub(s, 1, -3), 1
    elseif #s >= 1 and string.sub(low, -1) == 's' then
      digits = string.sub(s, 1, -2)
    end
  end
  if #digits == 0 or #digits > 20 or string.find(digits, '[^0-9]') then E_window(longest) end
  local t = string.gsub(digits, '^0+', '')
  if t == '' or not within(t, U64_MAX) then E_window(longest) end
  local ms = mul(fromdigits(t), unit)
  if cmp(ms, longest) > 0 then E_window(longest) end
  return ms
end

local function parse_now(s)
  local n = parse_u64(s)
  if n == nil then E_badnow() end
  if n < 94694400000 then
    fail('ERR NOW must be unix time in microseconds; ' .. str(n) .. ' looks like seconds')
  end
  if n < MIN_NOW_US then
    fail('ERR NOW must be unix time in microseconds; ' .. str(n) .. ' looks like milliseconds')
  end
  if n > MAX_NOW_US then E_badnow() end
  return n
end

-- `<limit> <window>`, the window at most `longest` ms (the algorithm's bound).
local function spec_of(limit, window, longest)
  local l = parse_amount('limit', limit)
  local ms = parse_window(window, longest)
  return { limit = l, ms = ms, w = mul(ms, 1000), cost = 1 }
end

local KEYWORDS = {
  NOW = 'NOW', COST = 'COST', PEEK = 'PEEK', RESET = 'RESET', BURST = 'BURST',
  LEASE = 'LEASE', REFUND = 'REFUND', BLOCK = 'BLOCK', EXTEND = 'EXTEND', IMPOSE = 'IMPOSE',
  BACKOFF = 'BACKOFF', STRIKES = 'STRIKES', COUNTALL = 'COUNTALL', RENEW = 'RENEW',
  REFILL = 'REFILL', ESCALATE = 'ESCALATE',
}

local function keyword(o)
  if #o < 3 or #o > 8 then return nil end
  return KEYWORDS[string.upper(o)]
end

local function set_mode(mode, name)
  if mode == nil then return name end
  if mode == name then E_repeated(name) end
  fail('ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other')
end

-- BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES]: parsed and checked as the module
-- does, so that a wrong one gets the module's error.
local function block_take(b, name, value)
  if name == 'BLOCK' or name == 'BACKOFF' then
    local ok, ms = pcall(parse_window, value or '')
    if not ok then
      fail('ERR ' .. name .. ' must be a positive duration such as 60, 60s or 1500ms, at most ' .. MAX_WINDOW_MS .. 'ms')
    end
    value = ms
  else
    value = true
  end
  if b[name] then E_repeated(name) end
  b[name] = value
end

local function block_finish(b)
  if not b.BLOCK then
    for _, name in ipairs({ 'EXTEND', 'BACKOFF', 'STRIKES' }) do
      if b[name] then fail('ERR syntax error: ' .. name .. ' needs BLOCK') end
    end
    return nil
  end
  if b.EXTEND and b.BACKOFF then fail('ERR syntax error: EXTEND and BACKOFF exclude each other') end
  if b.BACKOFF and b.BACKOFF < b.BLOCK then fail("ERR BACKOFF must be a duration no shorter than BLOCK's") end
  return b
end

---------------------------------------------------------------------------------------
-- Reading state, as the engine does: counters as INCRBY reads them, logs as sorted sets.

local function read_counter(name)
  local v = redis.pcall('GET', name)
  if type(v) == 'table' and v.err then fail(WRONGTYPE) end
  if not v then return nil end
  local neg, digits = string.match(v, '^(%-?)([0-9]+)$')
  local bad = digits == nil or (#digits > 1 and string.sub(digits, 1, 1) == '0')
    or (neg == '-' and digits == '0')
    or not within(digits, I64_MAX) or neg == '-'
  if bad then
    -- A negative counter that INCRBY would read is still not a count.
    fail("ERR limiter key '" .. name .. "' does not hold a non-negative integer")
  end
  return fromdigits(digits)
end

-- A key's expiry instant in unix ms (nil without a TTL), for COUNTER: PEXPIRETIME
-- where the server has it (7.0+), else the server's TIME plus PTTL.
local function read_expiry(name)
  local at = redis.pcall('PEXPIRETIME', name)
  if type(at) == 'number' then
    if at < 0 then return nil end
    return at
  end
  local pttl = redis.call('PTTL', name)
  if pttl < 0 then return nil end
  local t = redis.call('TIME')
  return add(tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000), pttl)
end

-- Reads key `i` of `l` into `st`: its counter, and for an expiring one its expiry.
local function read_counter_of(l, st, i)
  local u = l.uses[i]
  st[i] = read_counter(u.name)
  if u.expiring then
    st.expires = st.expires or {}
    st.expires[i] = st[i] ~= nil and read_expiry(u.name) or nil
  end
end

-- A string of several integers `<a>:<b>:…` (SLIDEWINDOW's and TOKENBUCKET's states),
-- one per entry of `layout[1]` and each at most it; anything else is another writer's
-- value.
local function read_fields(name, layout)
  local v = redis.pcall('GET', name)
  if type(v) == 'table' and v.err then fail(WRONGTYPE) end
  if not v then return nil end
  local function bad() fail("ERR limiter key '" .. name .. "' does not hold " .. layout[2]) end
  local values, pos, maxima = {}, 1, layout[1]
  for i, m in ipairs(maxima) do
    local from, to = string.find(v, '^[0-9]+', pos)
    if not from or to - from + 1 > 20 then bad() end
    local digits = (string.gsub(string.sub(v, from, to), '^0+(.)', '%1'))
    if not within(digits, m) then bad() end
    values[i] = fromdigits(digits)
    pos = to + 1
    if i < #maxima then
      if string.sub(v, pos, pos) ~= ':' then bad() end
      pos = pos + 1
    elseif pos <= #v then bad() end
  end
  return values
end

-- A score as a whole microsecond, rounded up (scores written by others may be fractional).
local function stamp(s) return math.ceil(tonumber(s)) end

-- A sorted set's entries above `cutoff`, read lazily but for the newest ones: the
-- newest is checked against the layout (`holds` says what the set should hold).
local function read_log(name, cutoff, member, holds)
  local total = redis.pcall('ZCARD', name)
  if type(total) == 'table' then fail(WRONGTYPE) end
  local log = { name = name, cutoff = cutoff, member = member, total = total, expired = 0 }
  local above = '(' .. str(cutoff)
  if total > 0 then
    log.expired = redis.call('ZCOUNT', name, '-inf', str(cutoff))
    if member then
      local s = redis.call('ZSCORE', name, member)
      log.raw_score = s
      if s and tonumber(s) > cutoff then log.score = stamp(s) end
    end
  end
  log.count = total - log.expired
  -- At most two members from the top: the call's member and the one below it.
  local newest, newest_other
  if log.count > 0 then
    local r = redis.call('ZREVRANGEBYSCORE', name, '+inf', above, 'WITHSCORES', 'LIMIT', '0', member and '2' or '1')
    -- +inf included (a sorted set never holds a NaN).
    if r[2] and tonumber(r[2]) > MAX_NOW_US then
      fail("ERR limiter key '" .. name .. "' does not hold " .. holds)
    end
    for i = 1, #r, 2 do
      newest = newest or stamp(r[i + 1])
      if r[i] ~= member then newest_other = stamp(r[i + 1]); break end
    end
  end
  function log.nth_oldest(n)
    if n == 0 or log.count == 0 then return nil end
    local r = redis.call('ZRANGEBYSCORE', name, above, '+inf', 'WITHSCORES', 'LIMIT', str(n - 1), '1')
    if r[2] then return stamp(r[2]) end
    return nil
  end
  function log.newest() return newest end
  function log.newest_except_member() return newest_other end
  return log
end

---------------------------------------------------------------------------------------
-- Shared arithmetic of the decisions (src/algo/mod.rs).

local function ceil_ms(us) return div_ceil(us, 1000) end
local function retry_ms(us) return ceil_ms(us) end
local function remaining(limit, used) return subsat(limit, used) end

local function decision(allowed, rem, retry, reset)
  return { allowed = allowed, remaining = rem, retry = retry, reset = reset }
end

-- An integer reply. Past 2^53 a Lua number is the nearest double; the module's
-- i64::MAX saturation is the largest double below 2^63 here.
local function int(x)
  if type(x) == 'number' then return x end
  return math.min(tofloat(x), 9223372036854774784)
end

local function ints(d)
  return { d.allowed and 1 or 0, int(d.remaining), int(d.retry), int(d.reset) }
end

---------------------------------------------------------------------------------------
-- The algorithms (src/algo/*.rs): keys, decide and refund on the state they read.

local A = {}

-- An admitted counter spend: INCRBY, with a TTL of two windows when it creates it.
local function counter_writes(d, spec)
  if not d.allowed then return {} end
  return { { op = 'incrby', key = 1, by = spec.cost, ttl = spec.ms * 2 } }
end

local function counter_refund(st, spec)
  local by = min(st[1] or 0, spec.cost)
  if by == 0 then return {} end
  return { { op = 'decrby', key = 1, by = by } }
end

-- FIXED: `<key>:<window start>`, in seconds for whole-second windows, else in ms.
A.FIXED = {}
function A.FIXED.keys(spec, base, now)
  local _, off = ndiv(now, spec.w)
  local start = now - off
  local n = ndiv(start, (spec.ms % 1000 == 0) and 1000000 or 1000)
  return { { name = base .. ':' .. str(n), kind = 'int', written = true } }
end
function A.FIXED.decide(st, spec, now)
  local count = st[1] or 0
  local limit, cost = spec.limit, spec.cost
  local allowed = cmp(add(cost, count), limit) <= 0
  local used_after = allowed and add(count, cost) or count
  local _, off = ndiv(now, spec.w)
  local until_next = spec.w - off
  local retry
  if allowed then retry = 0 elseif cost > limit then retry = -1 else retry = retry_ms(until_next) end
  local d = decision(allowed, remaining(limit, used_after), retry,
    cmp(used_after, 0) == 0 and 0 or ceil_ms(until_next))
  return d, counter_writes(d, spec)
end
A.FIXED.refund = counter_refund


-- COUNTER (src/algo/counter.rs): one counter at the key itself, whose TTL is the window,
-- set when it is created: the window ends when the key expires. `st.expires[1]` is the
-- key's expiry instant (unix ms), nil without a TTL (see read_expiry).
A.COUNTER = { counts = true, longest = fromdigits(MAX_LONG_WINDOW_MS) }
function A.COUNTER.keys(spec, base)
  return { { name = base, kind = 'int', written = true, expiring = true } }
end
-- 'none' (no counter), 'ended' (its expiry instant is at or before now), 'live' (with
-- its end in µs), 'untimed' (no TTL: another writer's INCR).
local function counter_window(st, now)
  local count = st[1]
  if count == nil then return 'none', 0 end
  local ms = st.expires and st.expires[1]
  if ms == nil then return 'untimed', count end
  local ends = mul(ms, 1000)
  if cmp(ends, now) <= 0 then return 'ended', 0 end
  return 'live', count, ends
end
-- ESCALATE's TTL on a denial, the count after it `used_after`: window × 2^(used_after −
-- limit − 1), at most MAX_ESCALATED_MS.
local function escalated_ms(spec, used_after)
  local doublings = subsat(used_after, add(spec.limit, 1))
  if cmp(doublings, 64) >= 0 then return MAX_ESCALATED_MS end
  return min(mul(spec.ms, 2 ^ doublings), MAX_ESCALATED_MS)
end
-- By default only an admitted call adds its cost; with COUNTALL every call does (the
-- count stops at MAX_AMOUNT, where it denies as any larger one would), and with RENEW
-- every call that adds restarts the window. ESCALATE counts as COUNTALL does, and a
-- denied call on an existing counter sets its TTL to escalated_ms.
function A.COUNTER.decide(st, spec, now)
  local state, count, ends = counter_window(st, now)
  local until_end = spec.w
  if state == 'live' then until_end = sub(ends, now) end
  local limit, cost = spec.limit, spec.cost
  local allowed = cmp(add(count, cost), limit) <= 0
  local counted = allowed or spec.count_all or spec.escalate
  local by = counted and min(cost, MAX_AMOUNT - count) or 0
  local used_after = add(count, by)
  local renews = counted and spec.renew
  local escalated
  if not allowed and spec.escalate and (state == 'live' or state == 'untimed') then
    escalated = escalated_ms(spec, used_after)
    until_end = mul(escalated, 1000)
  elseif renews then
    until_end = spec.w
  end
  local retry
  if allowed then retry = 0 elseif cost > limit then retry = -1 else retry = retry_ms(until_end) end
  local d = decision(allowed, remaining(limit, used_after), retry,
    cmp(used_after, 0) == 0 and 0 or ceil_ms(until_end))
  local incr = { op = 'incrby', key = 1, by = by, ttl = spec.ms }
  local expire = { op = 'expire', key = 1, ttl = escalated or spec.ms }
  local w = {}
  if counted then
    -- The TTL before the INCRBY, which keeps it.
    if state == 'ended' then w = { { op = 'set', key = 1, value = by, ttl = spec.ms } }
    elseif state == 'untimed' or (state == 'live' and (renews or escalated)) then w = { expire }
    end
    if by > 0 and state ~= 'ended' then w[#w + 1] = incr end
  elseif state == 'untimed' then
    -- A denial spends nothing, but a counter without a TTL would deny forever.
    w = { expire }
  end
  return d, w
end
-- The stored window's reset, whatever the call's options would write.
function A.COUNTER.own_reset(st, spec, now)
  local nothing = {}
  for k, v in pairs(spec) do nothing[k] = v end
  nothing.cost, nothing.count_all, nothing.renew, nothing.escalate = 0, nil, nil, nil
  return (A.COUNTER.decide(st, nothing, now)).reset
end
function A.COUNTER.refund(st, spec, now)
  local state, count = counter_window(st, now)
  if state == 'none' or state == 'ended' then return {} end
  local by = min(count, spec.cost)
  if by == 0 then return {} end
  return { { op = 'decrby', key = 1, by = by } }
end

-- SLIDECOUNT: `<key>:<i>` (written) and `<key>:<i-1>` (read), i = floor(now / window).
A.SLIDECOUNT = {}
function A.SLIDECOUNT.keys(spec, base, now)
  local i = ndiv(now, spec.w)
  local keys = { { name = base .. ':' .. str(i), kind = 'int', written = true } }
  if i >= 1 then keys[2] = { name = base .. ':' .. str(i - 1), kind = 'int', written = false } end
  return keys
end

local function estimate(cur, prev, w, elapsed)
  return add(cur, (div(mul(prev, w - elapsed), w)))
end

-- floor(((budget + 1) * w - 1) / n): how much of a faded window may still be covered.
local function covered_at_most(n, budget, w)
  local x = sub(mul(add(budget, 1), w), 1)
  if type(n) ~= 'number' or n >= 4503599627370496 then
    return floor(tofloat(x) / tofloat(n))
  end
  return (div(x, n))
end

local function wait_until_at_most(cur, prev, w, elapsed, target)
  if cmp(cur, target) <= 0 then
    if cmp(prev, 0) == 0 then return 0 end
    local x = min(covered_at_most(prev, sub(target, cur), w), w)
    return subsat(w - x, elapsed)
  end
  local x = min(covered_at_most(cur, target, w), w)
  return (w - elapsed) + (w - x)
end

function A.SLIDECOUNT.decide(st, spec, now)
  local cur, prev = st[1] or 0, st[2] or 0
  local w, limit, cost = spec.w, spec.limit, spec.cost
  local _, elapsed = ndiv(now, w)
  local est = estimate(cur, prev, w, elapsed)
  local allowed = cmp(add(est, cost), limit) <= 0
  local after = allowed and add(cur, cost) or cur
  local used_after = allowed and add(est, cost) or est
  local retry
  if allowed then retry = 0
  elseif cost > limit then retry = -1
  else retry = retry_ms(wait_until_at_most(cur, prev, w, elapsed, limit - cost)) end
  local d = decision(allowed, remaining(limit, used_after), retry,
    ceil_ms(wait_until_at_most(after, prev, w, elapsed, 0)))
  return d, counter_writes(d, spec)
end
A.SLIDECOUNT.refund = counter_refund

-- SLIDEWINDOW (src/algo/slidewindow.rs): Symfony's sliding window, anchored at the
-- first admitted call: `<end-µs>:<count>:<previous>` at the key itself.
A.SLIDEWINDOW = { fields = { { MAX_END_US, '1000000000000000', '1000000000000000' },
  'a sliding window (<end in unix microseconds up to 2265>:<count>:<previous count>, counts up to 1000000000000000)' } }
function A.SLIDEWINDOW.keys(spec, base)
  return { { name = base, kind = 'fields', written = true } }
end
-- The window in force at `now`: the stored one up to its end included, the next one
-- (the stored count its previous) during the window after it, else a fresh one.
local function window_roll(s, w, now)
  if s and cmp(now, s[1]) <= 0 then return s end
  if s and cmp(now, add(s[1], w)) < 0 then return { add(s[1], w), 0, s[2] } end
  return { add(now, w), 0, 0 }
end
local function window_estimate(s, w, now)
  local covered = min(subsat(s[1], now), w)
  return add(s[2], (div(mul(s[3], covered), w)))
end
local function window_wait(s, w, now, target)
  local ends, count, prev = s[1], s[2], s[3]
  if cmp(count, target) <= 0 then
    if cmp(prev, 0) == 0 then return 0 end
    local x = min(covered_at_most(prev, sub(target, count), w), w)
    return subsat(subsat(ends, x), now)
  end
  local x = min(covered_at_most(count, target, w), w)
  return subsat(sub(add(ends, w), x), now)
end
local function window_forgotten(s, w, now) return ceil_ms(subsat(add(s[1], w), now)) end
local function window_set(s, w, now)
  return { op = 'set', key = 1, value = str(s[1]) .. ':' .. str(s[2]) .. ':' .. str(s[3]),
    ttl = window_forgotten(s, w, now) }
end
function A.SLIDEWINDOW.own_reset(st, spec, now)
  local s = st[1]
  if s and cmp(now, add(s[1], spec.w)) < 0 then
    return window_forgotten(window_roll(s, spec.w, now), spec.w, now)
  end
  return 0
end
function A.SLIDEWINDOW.decide(st, spec, now)
  local w, limit, cost = spec.w, spec.limit, spec.cost
  local s = window_roll(st[1], w, now)
  local est = window_estimate(s, w, now)
  local allowed = cmp(add(est, cost), limit) <= 0
  local used_after = allowed and add(est, cost) or est
  local retry
  if allowed then retry = 0
  elseif cost > limit then retry = -1
  else retry = retry_ms(window_wait(s, w, now, limit - cost)) end
  if not allowed then
    return decision(false, remaining(limit, used_after), retry, A.SLIDEWINDOW.own_reset(st, spec, now)), {}
  end
  local after = { s[1], add(s[2], cost), s[3] }
  return decision(true, remaining(limit, used_after), 0, window_forgotten(after, w, now)),
    { window_set(after, w, now) }
end
-- Up to `cost` of the window in force's own count (the previous window's is past refunding).
function A.SLIDEWINDOW.refund(st, spec, now)
  local s = window_roll(st[1], spec.w, now)
  local by = min(s[2], spec.cost)
  if cmp(by, 0) == 0 then return {} end
  return { window_set({ s[1], sub(s[2], by), s[3] }, spec.w, now) }
end

-- SLIDELOG: one sorted-set entry per admitted unit, `<now>:<8 hex>` scored `<now>`.
A.SLIDELOG = { log_layout = 'a sliding log (entries scored in unix microseconds up to 2255)' }
function A.SLIDELOG.check(spec)
  if spec.limit > MAX_LOG_LIMIT then E_positive('limit', MAX_LOG_LIMIT) end
  if spec.cost > MAX_LOG_LIMIT then E_positive('COST', MAX_LOG_LIMIT) end
end
function A.SLIDELOG.keys(spec, base, now)
  return { { name = base, kind = 'log', cutoff = math.max(now - spec.w, 0), written = true } }
end
function A.SLIDELOG.decide(st, spec, now)
  local log = st[1]
  local count, limit, cost, w = log.count, spec.limit, spec.cost, spec.w
  local allowed = count + cost <= limit
  local used_after = allowed and count + cost or count
  local function gone_after(t) return math.max((t - now) + w, 0) end
  local retry
  if allowed then retry = 0
  elseif cost > limit then retry = -1
  else
    local t = log.nth_oldest(math.max(count + cost - limit, 0))
    retry = t and retry_ms(gone_after(t)) or -1
  end
  local newest = log.newest()
  -- The newest entry once the request's own are in (a request of no units adds none).
  if allowed and cost > 0 then newest = math.max(newest or now, now) end
  local d = decision(allowed, remaining(limit, used_after), retry,
    newest and ceil_ms(gone_after(newest)) or 0)
  local cutoff = math.max(now - w, 0)
  local writes
  if allowed then
    writes = { { op = 'trim', key = 1, cutoff = cutoff }, { op = 'add', key = 1, at = now, count = cost },
      { op = 'expire', key = 1, ttl = spec.ms } }
  else
    writes = { { op = 'trim', key = 1, cutoff = cutoff }, { op = 'expire', key = 1, ttl = spec.ms } }
  end
  return d, writes
end
function A.SLIDELOG.refund(st, spec, now)
  if st[1].count == 0 then return {} end
  return { { op = 'remove_newest', key = 1, count = spec.cost, cutoff = math.max(now - spec.w, 0) } }
end

-- GCRA: the theoretical arrival time in µs at the key, on the lattice ceil(j w / l).
A.GCRA = { burst = true,
  layout = { MAX_END_US, "a GCRA arrival time (unix microseconds up to 2265; CL.THROTTLE's are nanoseconds)" } }
function A.GCRA.check(spec)
  if spec.limit > spec.w then
    fail('ERR RL.GCRA spaces requests at least 1 µs apart: limit may not exceed the window in microseconds (' .. str(spec.w) .. ')')
  end
end
function A.GCRA.keys(spec, base)
  return { { name = base, kind = 'int', written = true } }
end

local function rate(spec)
  local r = { l = spec.limit, w = spec.w, burst = spec.burst or spec.limit }
  if r.w % r.l == 0 then r.interval = r.w / r.l end
  return r
end
local function lattice(r, j) return div_ceil(mul(j, r.w), r.l) end
local function advance_on_lattice(r, from, units)
  local j = div(mul(from, r.l), r.w)
  return sub(add(from, lattice(r, add(j, units))), lattice(r, j))
end
local function advance(r, from, units)
  if r.interval then return add(from, mul(units, r.interval)) end
  return advance_on_lattice(r, from, units)
end
local function retreat(r, to, units)
  local j = div(mul(to, r.l), r.w)
  for _, k in ipairs({ cmp(j, units) >= 0 and sub(j, units) or false,
    cmp(j, add(units, 1)) >= 0 and sub(j, add(units, 1)) or false }) do
    if k then
      local step = sub(lattice(r, add(k, units)), lattice(r, k))
      if cmp(to, step) >= 0 then
        local from = sub(to, step)
        if cmp(div(mul(from, r.l), r.w), k) == 0 then return from end
      end
    end
  end
  return subsat(to, (div(mul(units, r.w), r.l)))
end
local function tolerance(r) return div_ceil(mul(r.burst, r.w), r.l) end

local function gcra_remaining(r, tol, tat, now)
  local ahead = subsat(tat, now)
  if cmp(ahead, tol) > 0 then return 0 end
  local base = max(tat, now)
  if not within(str(base), U64_MAX) then return 0 end
  local room = sub(tol, ahead)
  if r.interval then return min((div(room, r.interval)), r.burst) end
  local function fits(k) return cmp(sub(advance_on_lattice(r, base, k), now), tol) <= 0 end
  local function units(us) return (div(mul(us, r.l), r.w)) end
  local low = min(units(subsat(room, 1)), r.burst)
  local high = min(units(add(room, 1)), r.burst)
  if not fits(low) then low = 0 end
  while cmp(low, high) < 0 do
    local mid = add(low, div_ceil(sub(high, low), 2))
    if fits(mid) then low = mid else high = sub(mid, 1) end
  end
  return low
end

-- The TAT as stored, expiring when it is reached.
local function gcra_store(value, now)
  -- Never beyond what a read accepts as a TAT (2265).
  if not within(str(value), MAX_END_US) then
    fail('ERR RL.GCRA: the arrival time would overflow (BURST x window / limit is too long)')
  end
  return { { op = 'set', key = 1, value = value, ttl = ceil_ms(subsat(value, now)) } }
end

local function gcra_decide(stored, r, cost, now)
  local tat = max(stored or 0, now)
  local tol = tolerance(r)
  local new_tat = advance(r, tat, cost)
  local allowed = cmp(cost, r.burst) <= 0 and cmp(sub(new_tat, now), tol) <= 0
  local tat_after = allowed and new_tat or tat
  local retry
  if allowed then retry = 0
  elseif cmp(cost, r.burst) > 0 then retry = -1
  else retry = retry_ms(sub(sub(new_tat, tol), now)) end
  return decision(allowed, gcra_remaining(r, tol, tat_after, now), retry,
    ceil_ms(sub(tat_after, now))), new_tat
end

function A.GCRA.decide(st, spec, now)
  local d, new_tat = gcra_decide(st[1], rate(spec), spec.cost, now)
  if not d.allowed then return d, {} end
  return d, function() return gcra_store(new_tat, now) end
end
function A.GCRA.refund(st, spec, now)
  local tat = st[1]
  if tat == nil or cmp(tat, now) <= 0 then return {} end
  local back = retreat(rate(spec), tat, spec.cost)
  if cmp(back, now) <= 0 then return { { op = 'del', key = 1 } } end
  return gcra_store(back, now)
end

-- TOKENBUCKET: `<tokens>:<timer-µs>` at the key, the tokens at the timer (its last
-- refill step), REFILL tokens at each whole interval since, up to the capacity. Here a
-- level is `t - debt` (one of them 0: the exact integers are non-negative): a debt is
-- owed by a spend decided at a later NOW, whose timer is after now.
A.TOKENBUCKET = { refill = true,
  fields = { { '1000000000000000', MAX_END_US },
    'a token bucket (<tokens>:<timer in unix microseconds>, tokens up to 1000000000000000)' } }
function A.TOKENBUCKET.keys(spec, base)
  return { { name = base, kind = 'fields', written = true } }
end

local function bucket(spec)
  return { cap = spec.limit, refill = spec.refill or 1, step = spec.w }
end

local function tb_full(l, r) return cmp(l.debt, 0) == 0 and cmp(l.t, r.cap) >= 0 end

-- The stored pair at `now`; a full bucket is a new one, its timer at now.
local function tb_level(pair, r, now)
  if pair == nil then return { t = r.cap, debt = 0, timer = now } end
  local tok, timer = pair[1], pair[2]
  local l
  if cmp(timer, now) <= 0 then
    local steps = div(sub(now, timer), r.step)
    l = { t = add(tok, mul(steps, r.refill)), debt = 0, timer = add(timer, mul(steps, r.step)) }
  else
    -- The steps between now and the timer have not come yet.
    local steps = div_ceil(sub(timer, now), r.step)
    local back = mul(steps, r.refill)
    l = { t = subsat(tok, back), debt = subsat(back, tok), timer = subsat(timer, mul(steps, r.step)) }
  end
  if tb_full(l, r) then return { t = r.cap, debt = 0, timer = now } end
  return l
end

-- How far below `want` the level is (0 if not), and the instant that many have come.
local function tb_missing(l, want) return subsat(add(want, l.debt), l.t) end
local function tb_when(l, r, missing) return add(l.timer, mul(div_ceil(missing, r.refill), r.step)) end
local TB_END = fromdigits(MAX_END_US)

-- Until the bucket is full again, in ms; past 2265 (no NOW reaches it), until then.
local function tb_until_full(l, r, now)
  if tb_full(l, r) then return 0 end
  return ceil_ms(subsat(min(tb_when(l, r, tb_missing(l, r.cap)), TB_END), now))
end

local function tb_store(after, r, now)
  if tb_full(after, r) then return { { op = 'del', key = 1 } } end
  local ttl = tb_until_full(after, r, now)
  local t, timer = after.t, after.timer
  -- A debt is stored as the level at the first step that pays it, a timer after now.
  if cmp(after.debt, 0) > 0 then
    local lift = div_ceil(after.debt, r.refill)
    t = sub(mul(lift, r.refill), after.debt)
    -- Past 2265 (a NOW in the 1970s on a decade's interval) it is stored at 2265.
    timer = min(add(timer, mul(lift, r.step)), TB_END)
  end
  return { { op = 'set', key = 1, value = str(t) .. ':' .. str(timer), ttl = ttl } }
end

function A.TOKENBUCKET.decide(st, spec, now)
  local r = bucket(spec)
  local l = tb_level(st[1], r, now)
  local cost = spec.cost
  local allowed = cmp(l.debt, 0) == 0 and cmp(cost, l.t) <= 0
  local after = l
  if allowed then after = { t = sub(l.t, cost), debt = 0, timer = l.timer } end
  local retry = 0
  if not allowed then
    -- Tokens that come at a step after 2265 (a huge cost on a slow refill): never.
    local at = tb_when(l, r, tb_missing(l, cost))
    if cmp(cost, r.cap) > 0 or cmp(at, TB_END) > 0 then retry = -1
    else retry = retry_ms(subsat(at, now)) end
  end
  local d = decision(allowed, cmp(after.debt, 0) == 0 and after.t or 0, retry, tb_until_full(after, r, now))
  if not allowed then return d, {} end
  return d, tb_store(after, r, now)
end
function A.TOKENBUCKET.refund(st, spec, now)
  if st[1] == nil then return {} end
  local r = bucket(spec)
  local l = tb_level(st[1], r, now)
  local cost = spec.cost
  local back
  if cmp(cost, l.debt) >= 0 then
    back = { t = min(r.cap, add(l.t, sub(cost, l.debt))), debt = 0, timer = l.timer }
  else
    back = { t = 0, debt = sub(l.debt, cost), timer = l.timer }
  end
  return tb_store(back, r, now)
end

-- CONCURRENCY: leases in a sorted set, member = lease id, score = its expiry (µs).
A.CONCURRENCY = { member = true,
  log_layout = 'a lease set (leases scored with their expiry in unix microseconds up to 2255)' }
function A.CONCURRENCY.check(spec)
  if spec.limit > MAX_LOG_LIMIT then E_positive('limit', MAX_LOG_LIMIT) end
  if spec.cost ~= 1 then fail('ERR RL.CONCURRENCY: a lease is one slot, COST is not accepted') end
end
function A.CONCURRENCY.keys(spec, base, now)
  return { { name = base, kind = 'log', cutoff = now, written = true } }
end
local function lease_expire(last, now) return { op = 'expire', key = 1, ttl = ceil_ms(math.max(last - now, 0)) } end
function A.CONCURRENCY.decide(st, spec, now)
  local log = st[1]
  local held = log.score ~= nil
  local count, limit = log.count, spec.limit
  local allowed = held or (not spec.renew_only and count < limit)
  local after = (allowed and not held) and count + 1 or count
  -- now + ttl may pass 2^53 (it is then refused, but still replied): exact.
  local untl = add(now, spec.w)
  local retry
  if allowed then retry = 0
  elseif spec.renew_only then retry = -1
  else
    local t = log.nth_oldest(math.max(count + 1 - limit, 0))
    retry = t and retry_ms(math.max(t - now, 0)) or -1
  end
  local last
  local others = allowed and log.newest_except_member() or nil
  if allowed then
    last = others and max(math.max(others, 0), untl) or untl
  else
    last = log.newest()
    if last and last < 0 then last = nil end
  end
  local d = decision(allowed, remaining(limit, after), retry,
    last and ceil_ms(subsat(last, now)) or 0)
  if not allowed then return d, {} end
  if cmp(untl, MAX_NOW_US) > 0 then
    return d, function() fail('ERR RL.CONCURRENCY: the lease would expire after 2255 (ttl too long for NOW)') end
  end
  return d, { { op = 'trim', key = 1, cutoff = now }, { op = 'zadd_member', key = 1, score = untl },
    lease_expire(last, now) }
end
-- Until the last lease held expires: a new lease is not counted.
function A.CONCURRENCY.own_reset(st, spec, now)
  local last = st[1].newest()
  if last == nil or last < 0 then return 0 end
  return ceil_ms(subsat(last, now))
end
function A.CONCURRENCY.refund(st, spec, now)
  local log = st[1]
  if log.score == nil then return { { op = 'trim', key = 1, cutoff = now } } end
  local others = log.newest_except_member()
  local w = { { op = 'trim', key = 1, cutoff = now }, { op = 'zrem_member', key = 1 } }
  if others and others >= 0 then w[3] = lease_expire(others, now) end
  return w
end

-- THROTTLE: redis-cell's CL.THROTTLE, its TAT in nanoseconds at the key.
A.THROTTLE = { burst = true, layout = { I64_MAX, 'a redis-cell arrival time (unix nanoseconds)' } }
local NS = 1000000000
local function throttle_overflow()
  fail('ERR RL.THROTTLE: the arrival time would overflow (max_burst or quantity x period / count is too long)')
end
local function cell(spec)
  local interval = floor(spec.ms * 1000000 / spec.limit)
  if interval < 1000 then
    fail('ERR RL.THROTTLE: count per period allows at most one per microsecond (' ..
      str(floor(spec.ms / 1000) * 1000000) .. ' in this period)')
  end
  -- Past 2^53 ns (a long period over a small count) the double is still an integer.
  if interval >= TWO53 then interval = tobig(interval) end
  local tol = mul(interval, spec.burst + 1)
  if not within(str(tol), I64_MAX) then throttle_overflow() end
  return interval, tol
end
function A.THROTTLE.check(spec)
  local interval = cell(spec)
  if not within(str(mul(interval, spec.cost)), I64_MAX) then throttle_overflow() end
end
A.THROTTLE.keys = A.GCRA.keys

-- redis-cell's reply seconds: whole seconds, plus one if the millisecond part is not 0.
local function seconds(ns)
  local whole, rest = div(ns, NS)
  if rest >= 1000000 then whole = add(whole, 1) end
  return whole
end

function A.THROTTLE.decide(st, spec, now)
  local interval, tol = cell(spec)
  local now_ns = mul(now, 1000)
  local increment = mul(interval, spec.cost)
  -- A TAT whose millisecond is before now's: redis-cell's key would be gone, so it
  -- decides on no key (only a NOW past the server clock meets one).
  local stored = st[1]
  if stored and cmp((div(stored, 1000000)), (div(now_ns, 1000000))) < 0 then stored = nil end
  local tat = stored or now_ns
  local new_tat = add(max(tat, now_ns), increment)
  local limited = cmp(add(now_ns, tol), new_tat) < 0
  local retry = -1
  if limited and cmp(increment, tol) <= 0 then retry = seconds(sub(sub(new_tat, tol), now_ns)) end
  -- ttl = the TAT the call leaves minus now: negative when a stored TAT has just
  -- passed (the key lives out its last millisecond), which raises `remaining`.
  local t = limited and tat or new_tat
  local next, reset = 0, 0
  if cmp(t, now_ns) >= 0 then
    local ttl = sub(t, now_ns)
    if cmp(ttl, tol) < 0 then next = sub(tol, ttl) end
    reset = seconds(ttl)
  else
    next = add(tol, sub(now_ns, t))
  end
  local rem = 0
  if cmp(next, 0) > 0 then
    rem = floor(tofloat((div(next, 1000))) / tofloat((div(interval, 1000))))
  end
  local d = { allowed = not limited, remaining = rem, retry = retry, reset = reset,
    limit = spec.burst + 1 }
  if limited then return d, {} end
  if not within(str(new_tat), I64_MAX) then return d, throttle_overflow end
  return d, { { op = 'set', key = 1, value = new_tat, ttl = (div(sub(new_tat, now_ns), 1000000)) } }
end
function A.THROTTLE.refund() return {} end
function A.THROTTLE.reply(d)
  return { d.allowed and 0 or 1, d.limit, int(d.remaining), d.allowed and -1 or int(d.retry), int(d.reset) }
end

---------------------------------------------------------------------------------------
-- BLOCK, the penalty box (src/algo/block.rs): `<key>:block` holds the block's end in
-- unix µs, with `:<strikes>` when the call counts them, and expires when it ends. A
-- block's end passes 2^53 near NOW's end, so it is an exact integer here.

-- Whether calls while blocked count strikes (and so write the block key).
local function counts(b) return (b.STRIKES or b.EXTEND or b.BACKOFF) ~= nil end

-- A decimal integer up to the digit string `m`, exactly (leading zeros allowed, as
-- the module reads it), or nil.
local function parse_exact(s, m)
  if #s == 0 or #s > 20 or string.find(s, '[^0-9]') then return nil end
  local t = string.gsub(s, '^0+', '')
  if not within(t, m) then return nil end
  if t == '' then return 0 end
  return fromdigits(t)
end

local function read_block(name)
  local v = redis.pcall('GET', name)
  if type(v) == 'table' and v.err then fail(WRONGTYPE) end
  if not v then return nil end
  -- A block written without a count was started by one denial.
  local ends, strikes = v, '1'
  local at = string.find(v, ':', 1, true)
  if at then ends, strikes = string.sub(v, 1, at - 1), string.sub(v, at + 1) end
  -- An end or a count past the layout is no block call's.
  local h = { ends = parse_exact(ends, MAX_END_US), strikes = parse_exact(strikes, MAX_STRIKES) }
  if h.ends == nil or h.strikes == nil then
    fail("ERR limiter key '" .. name .. "' does not hold a block (its end in unix microseconds up to 2265, optionally :strikes up to 1000000000000000)")
  end
  return h
end

-- The block that holds at `now`, for a call with BLOCK.
local function blocked(l, now)
  local h = l.held
  if h and cmp(h.ends, now) > 0 then return h end
  return nil
end

-- What every call while blocked replies: denied, nothing left, and the full budget
-- back when the block ends (it cleared the limiter's keys when it began).
local function held_decision(h, now)
  local wait = ceil_ms(subsat(h.ends, now))
  return decision(false, 0, wait, wait)
end

-- The block key written to `h`, expiring when the block ends.
local function set_block(h, b, now)
  return { op = 'setblock', held = h, counted = counts(b), ttl = ceil_ms(sub(h.ends, now)) }
end

-- `duration × 2^(strikes − 1)`, at most `max` (every duration is at least 1000 µs, so
-- past 60 doublings it is the bound).
local function backoff(duration, strikes, bound)
  local k = sub(strikes, 1)
  if type(k) ~= 'number' or k > 60 then return bound end
  local length = duration
  for _ = 1, k do
    length = length * 2
    if length >= bound then return bound end
  end
  return math.min(length, bound)
end

-- A spending call while `h` holds counts a strike and moves the end when the call
-- counts them; PEEK, REFUND and a plain BLOCK write nothing.
local function while_blocked(b, h, mode, now)
  if mode ~= 'SPEND' or not counts(b) then return held_decision(h, now), nil end
  local strikes = math.min(h.strikes + 1, MAX_AMOUNT)
  local length = 0
  if b.EXTEND then length = b.BLOCK * 1000
  elseif b.BACKOFF then length = backoff(b.BLOCK * 1000, strikes, b.BACKOFF * 1000) end
  -- Never shorter than it was: an imposed block may be longer than any strike's.
  local after = { ends = max(h.ends, add(now, length)), strikes = strikes }
  return held_decision(after, now), after
end

-- A block starts at `now` (a denial, or IMPOSE with no strike): the limiter's keys are
-- cleared, so that the budget is full when it ends, then the block key is written.
local function start_block(l, b, now, strikes)
  local h = { ends = add(now, b.BLOCK * 1000), strikes = strikes }
  local w = {}
  for i = 1, #l.uses do w[i] = { op = 'del', key = i } end
  w[#w + 1] = set_block(h, b, now)
  return held_decision(h, now), w
end

---------------------------------------------------------------------------------------
-- Parsing a command's arguments (after the key) into limits.

local function parse_limiter(command, args, from, algo)
  local limit, window = args[from], args[from + 1]
  if window == nil then E_arity(command) end
  local spec = spec_of(limit, window, algo.longest)
  local cost, now, mode
  local block = {}
  local i = from + 2
  while args[i] ~= nil do
    local option = args[i]
    local name = keyword(option)
    if name == nil or (name == 'BURST' and not algo.burst) or (name == 'REFILL' and not algo.refill)
      or name == 'LEASE' then E_unknown(option) end
    if name == 'BLOCK' or name == 'BACKOFF' then
      if args[i + 1] == nil then E_missing(name) end
      block_take(block, name, args[i + 1])
      i = i + 2
    elseif name == 'EXTEND' or name == 'STRIKES' then
      block_take(block, name)
      i = i + 1
    elseif name == 'COUNTALL' or name == 'RENEW' or name == 'ESCALATE' then
      if not algo.counts then E_counter_only(name) end
      local field = name == 'COUNTALL' and 'count_all' or string.lower(name)
      if spec[field] then E_repeated(name) end
      spec[field] = true
      i = i + 1
    elseif name == 'COST' or name == 'BURST' or name == 'REFILL' or name == 'NOW' then
      local value = args[i + 1]
      if value == nil then E_missing(name) end
      if name == 'NOW' then
        local t = parse_now(value)
        if now then E_repeated(name) end
        now = t
      else
        local n = parse_amount(name, value)
        if name == 'COST' then
          if cost then E_repeated(name) end
          cost = n
        else
          local field = string.lower(name)
          if spec[field] then E_repeated(name) end
          spec[field] = n
        end
      end
      i = i + 2
    else
      mode = set_mode(mode, name)
      i = i + 1
    end
  end
  if spec.renew and spec.escalate then fail('ERR syntax error: RENEW and ESCALATE exclude each other') end
  spec.cost = cost or 1
  spec.block = block_finish(block)
  if mode == 'IMPOSE' and not spec.block then fail('ERR syntax error: IMPOSE needs BLOCK') end
  return spec, now, mode or 'SPEND'
end

local LEASE_OPS = { ACQUIRE = 1, RELEASE = 1, HEARTBEAT = 1, PEEK = 1, RESET = 1, NOW = 1 }

local function parse_concurrency(command, args, from)
  if args[from + 1] == nil then E_arity(command) end
  local spec = spec_of(args[from], args[from + 1])
  local now, mode, member
  local i = from + 2
  while args[i] ~= nil do
    local word = args[i]
    local name = string.upper(word)
    if name == 'BLOCK' then
      fail('ERR CONCURRENCY does not take BLOCK: a lease is work in flight, not an offence')
    end
    -- RL.ALL's limits take COST; a lease here is one slot too, and says so.
    if name == 'COST' then fail('ERR RL.CONCURRENCY: a lease is one slot, COST is not accepted') end
    if name == 'COUNTALL' or name == 'RENEW' or name == 'ESCALATE' then E_counter_only(name) end
    if #word > 9 or not LEASE_OPS[name] then E_unknown(word) end
    local takes_value = name ~= 'PEEK' and name ~= 'RESET'
    if takes_value and args[i + 1] == nil then E_missing(name) end
    if name == 'NOW' then
      local t = parse_now(args[i + 1])
      if now then E_repeated(name) end
      now = t
    else
      if mode then fail('ERR syntax error: ACQUIRE, RELEASE, HEARTBEAT, PEEK and RESET exclude each other') end
      if name == 'ACQUIRE' then mode = 'SPEND'
      elseif name == 'HEARTBEAT' then mode = 'SPEND'; spec.renew_only = true
      elseif name == 'RELEASE' then mode = 'REFUND'
      else mode = name end
      if takes_value then member = args[i + 1] end
    end
    i = i + (takes_value and 2 or 1)
  end
  if not mode then
    fail('ERR RL.CONCURRENCY needs one of ACQUIRE <id>, RELEASE <id>, HEARTBEAT <id>, PEEK or RESET')
  end
  return spec, now, mode, member
end

local function parse_throttle(command, args, from)
  for i = from, #args do
    if string.upper(args[i]) == 'BLOCK' then
      fail("ERR RL.THROTTLE does not take BLOCK: it keeps redis-cell's arguments; RL.GCRA takes BLOCK")
    end
  end
  local n = #args
  local now
  if n - from + 1 >= 2 and string.upper(args[n - 1]) == 'NOW' then
    now = parse_now(args[n])
    n = n - 2
  elseif n >= from and string.upper(args[n]) == 'NOW' then
    -- A trailing NOW without its value, as every other command says it.
    E_missing('NOW')
  end
  local count = n - from + 1
  if count > 4 then E_unknown(args[from + 4]) end
  if count < 3 then E_arity(command) end
  local function within_range(name, s, lo, hi)
    local v = parse_u64(s)
    if v == nil or v < lo or v > hi then
      fail('ERR RL.THROTTLE: ' .. name .. ' must be an integer from ' .. str(lo) .. ' to ' .. str(hi))
    end
    return v
  end
  local burst = within_range('max_burst', args[from], 0, MAX_AMOUNT)
  local cnt = within_range('count', args[from + 1], 1, MAX_AMOUNT)
  local period = within_range('period', args[from + 2], 1, MAX_WINDOW_MS / 1000)
  local quantity = 1
  if count == 4 then quantity = within_range('quantity', args[from + 3], 0, MAX_AMOUNT) end
  local spec = { limit = cnt, ms = period * 1000, w = period * 1000000, burst = burst, cost = quantity }
  return spec, now, quantity == 0 and 'PEEK' or 'SPEND'
end

local ALL_NAMES = { FIXED = 1, SLIDECOUNT = 1, SLIDELOG = 1, GCRA = 1, CONCURRENCY = 1, COUNTER = 1,
  SLIDEWINDOW = 1, TOKENBUCKET = 1 }

local function parse_all(args)
  local count = parse_u64(args[1])
  if count == nil or count < 1 or count > MAX_LIMITS then
    fail('ERR RL.ALL needs a number of limits from 1 to ' .. MAX_LIMITS)
  end
  local limits = {}
  local at = 2
  while #limits < count do
    local name, key, limit, window = args[at], args[at + 1], args[at + 2], args[at + 3]
    if window == nil then E_arity('rl.all') end
    local up = string.upper(name)
    if not ALL_NAMES[up] then fail("ERR RL.ALL: unknown algorithm '" .. name .. "'") end
    local algo = A[up]
    local spec = spec_of(limit, window, algo.longest)
    at = at + 4
    local cost
    local block = {}
    while args[at] ~= nil do
      local o = keyword(args[at])
      if o == 'COUNTALL' or o == 'RENEW' or o == 'ESCALATE' then E_not_in_all(o) end
      if o ~= 'COST' and o ~= 'BURST' and o ~= 'REFILL' and o ~= 'BLOCK' and o ~= 'BACKOFF' and o ~= 'EXTEND'
        and o ~= 'STRIKES' then break end
      if (o == 'BURST' and not algo.burst) or (o == 'REFILL' and not algo.refill) then E_unknown(args[at]) end
      local value = args[at + 1]
      if o == 'EXTEND' or o == 'STRIKES' then
        block_take(block, o)
        at = at - 1
      elseif value == nil then E_missing(o)
      elseif o == 'BLOCK' or o == 'BACKOFF' then
        block_take(block, o, value)
      elseif o == 'COST' then
        local v = parse_amount(o, value)
        if cost then E_repeated(o) end
        cost = v
      else
        local v = parse_amount(o, value)
        local field = string.lower(o)
        if spec[field] then E_repeated(o) end
        spec[field] = v
      end
      at = at + 2
    end
    spec.cost = cost or 1
    spec.block = block_finish(block)
    if spec.block and algo.member then
      fail('ERR CONCURRENCY does not take BLOCK: a lease is work in flight, not an offence')
    end
    limits[#limits + 1] = { algo = algo, key = key, spec = spec }
  end
  local now, mode, lease
  while args[at] ~= nil do
    local option = args[at]
    local name = keyword(option)
    if name == nil then E_unknown(option) end
    if name == 'COUNTALL' or name == 'RENEW' or name == 'ESCALATE' then E_not_in_all(name) end
    if name == 'COST' or name == 'BURST' or name == 'REFILL' or name == 'BLOCK' or name == 'BACKOFF' or name == 'EXTEND'
      or name == 'STRIKES' then
      fail('ERR syntax error: ' .. name .. ' belongs to a limit and must come before NOW, PEEK, REFUND or RESET')
    end
    if name == 'NOW' then
      if args[at + 1] == nil then E_missing(name) end
      local t = parse_now(args[at + 1])
      if now then E_repeated(name) end
      now = t
      at = at + 2
    elseif name == 'LEASE' then
      if args[at + 1] == nil then E_missing(name) end
      if lease then E_repeated(name) end
      lease = args[at + 1]
      at = at + 2
    else
      mode = set_mode(mode, name)
      at = at + 1
    end
  end
  for i = 1, #limits do
    for j = i + 1, #limits do
      if limits[i].key == limits[j].key then
        fail("ERR RL.ALL: key '" .. limits[i].key .. "' is used by more than one limit")
      end
    end
  end
  mode = mode or 'SPEND'
  local leased = false
  for _, l in ipairs(limits) do if l.algo.member then leased = true end end
  if lease and not leased then fail('ERR RL.ALL: LEASE is only for CONCURRENCY limits, and this call has none') end
  if leased and not lease and (mode == 'SPEND' or mode == 'REFUND') then
    fail("ERR RL.ALL: a CONCURRENCY limit needs the call's LEASE <id> (after the limits)")
  end
  if mode == 'IMPOSE' then
    local any = false
    for _, l in ipairs(limits) do if l.spec.block then any = true end end
    if not any then fail('ERR syntax error: IMPOSE needs BLOCK') end
  end
  for _, l in ipairs(limits) do if l.algo.member then l.member = lease end end
  return limits, now, mode
end

---------------------------------------------------------------------------------------
-- The engine (src/server/engine.rs): read every key, check everything that can
-- refuse, then write. A refused call changes nothing.

-- Whether Redis Cluster hashes only part of the key (a non-empty {tag}).
local function has_hash_tag(key)
  local open = string.find(key, '{', 1, true)
  if not open then return false end
  local close = string.find(key, '}', open + 1, true)
  return close ~= nil and close > open + 1
end

local cluster_mode
local function in_cluster()
  if cluster_mode == nil then
    cluster_mode = string.find(redis.call('INFO', 'cluster'), 'cluster_enabled:1', 1, true) ~= nil
  end
  return cluster_mode
end

local WINDOW_COUNTER = { '1000000000000000', 'a window counter (an integer up to 1000000000000000)' }

local function load(l, now, mode)
  if l.algo.check then l.algo.check(l.spec) end
  l.uses = l.algo.keys(l.spec, l.key, now)
  -- Derived keys (the block key too) must share the key's slot, which only a hash tag
  -- guarantees.
  local derived = l.spec.block or l.uses[1].name ~= l.key
  if derived and not has_hash_tag(l.key) and in_cluster() then
    fail("ERR key '" .. l.key .. "' needs a {hash tag} in cluster mode, so that its per-window keys stay in its slot")
  end
  if l.spec.block then
    l.block_name = l.key .. ':block'
    l.held = read_block(l.block_name)
    -- While blocked the limiter's own keys are neither read nor written.
    if blocked(l, now) and mode ~= 'RESET' and mode ~= 'IMPOSE' then return end
  end
  local st = {}
  for i, u in ipairs(l.uses) do
    if u.kind == 'int' then
      read_counter_of(l, st, i)
      -- A value beyond the layout's range is another layout's (a TAT in another unit).
      local layout = l.algo.layout or WINDOW_COUNTER
      if st[i] and not within(str(st[i]), layout[1]) then
        fail("ERR limiter key '" .. u.name .. "' does not hold " .. layout[2])
      end
    elseif u.kind == 'fields' then st[i] = read_fields(u.name, l.algo.fields)
    else st[i] = read_log(u.name, u.cutoff, l.member, l.algo.log_layout) end
  end
  l.st = st
end

local function reload(l)
  for i, u in ipairs(l.uses) do
    if u.kind == 'int' then read_counter_of(l, l.st, i)
    elseif u.kind == 'fields' then l.st[i] = read_fields(u.name, l.algo.fields)
    else l.st[i] = read_log(u.name, u.cutoff, l.member, l.algo.log_layout) end
  end
end

local hex_seeded = false
local function random_suffix()
  if not hex_seeded then
    local t = redis.call('TIME')
    math.randomseed(tonumber(t[2]) + tonumber(t[1]) % 1000 * 1000000)
    hex_seeded = true
  end
  return math.random(0, 65535) * 65536 + math.random(0, 65535)
end

local function member_of(at, suffix)
  return str(at) .. ':' .. string.format('%04x%04x', math.floor(suffix / 65536), suffix % 65536)
end

-- Lua's unpack takes at most a few thousand values (the C stack), so members go to
-- Redis in commands of at most WRITE_BATCH each, as the module replicates them.
local WRITE_BATCH = 1000

local function zrem_all(name, members)
  for i = 1, #members, WRITE_BATCH do
    redis.call('ZREM', name, unpack(members, i, math.min(i + WRITE_BATCH - 1, #members)))
  end
end

-- `count` new members at `at`, a batch per ZADD. The suffixes are drawn up front and
-- added in ascending order, as the module adds them: each member lands next to the
-- one before in the sorted set, a quarter of the time random order takes. A suffix
-- drawn twice or already taken is drawn again, so every unit is counted.
local function add_members(name, at, count)
  local score = str(at)
  local suffixes = {}
  for i = 1, count do suffixes[i] = random_suffix() end
  table.sort(suffixes)
  local args, added, last = {}, 0, nil
  local function flush()
    if #args > 0 then
      added = added + redis.call('ZADD', name, 'NX', unpack(args))
      args = {}
    end
  end
  for i = 1, count do
    local suffix = suffixes[i]
    if suffix ~= last then
      last = suffix
      args[#args + 1] = score
      args[#args + 1] = member_of(at, suffix)
      if #args == 2 * WRITE_BATCH then flush() end
    end
  end
  flush()
  while added < count do
    added = added + redis.call('ZADD', name, 'NX', score, member_of(at, random_suffix()))
  end
end

local function apply(l, w)
  local op = w.op
  local name = w.key and l.uses[w.key].name
  if op == 'setblock' then
    local h = w.held
    local value = str(h.ends)
    -- With the count when the call counts, or when it is not the one a missing count
    -- reads as (IMPOSE's 0).
    if w.counted or cmp(h.strikes, 1) ~= 0 then value = value .. ':' .. str(h.strikes) end
    redis.call('SET', l.block_name, value, 'PX', str(w.ttl))
    l.held = h
  elseif op == 'delblock' then
    redis.call('DEL', l.block_name)
    l.held = nil
  elseif op == 'incrby' then
    redis.call('INCRBY', name, str(w.by))
    if l.st[w.key] == nil then redis.call('PEXPIRE', name, str(w.ttl)) end
  elseif op == 'decrby' then
    redis.call('DECRBY', name, str(w.by))
  elseif op == 'set' then
    -- SET … PX 0 is refused: a TTL under 1 ms (RL.THROTTLE truncates) lives 1 ms.
    local ttl = w.ttl
    if cmp(ttl, 0) == 0 then ttl = 1 end
    -- A value is an integer, or already text (a state of several fields).
    local value = type(w.value) == 'string' and w.value or str(w.value)
    redis.call('SET', name, value, 'PX', str(ttl))
  elseif op == 'trim' then
    local log = l.st[w.key]
    local expired = log.expired
    if expired > 0 and expired <= TRIM_BATCH then
      redis.call('ZREMRANGEBYSCORE', name, '-inf', str(w.cutoff))
    elseif expired > TRIM_BATCH then
      local doomed = redis.call('ZRANGEBYSCORE', name, '-inf', str(w.cutoff), 'LIMIT', '0', str(TRIM_BATCH))
      zrem_all(name, doomed)
    end
  elseif op == 'add' then
    add_members(name, w.at, w.count)
  elseif op == 'expire' then
    redis.call('PEXPIRE', name, str(w.ttl))
  elseif op == 'remove_newest' then
    local doomed = redis.call('ZREVRANGEBYSCORE', name, '+inf', '(' .. str(w.cutoff), 'LIMIT', '0', str(w.count))
    zrem_all(name, doomed)
  elseif op == 'del' then
    redis.call('DEL', name)
  elseif op == 'zadd_member' then
    redis.call('ZADD', name, str(w.score), l.member)
  elseif op == 'zrem_member' then
    if l.st[w.key].raw_score then redis.call('ZREM', name, l.member) end
  end
end

-- The writes a limit makes in `mode`; a function stands for an error only a spending
-- call meets (an overflow), raised here, before anything is written.
local function plan(l, mode, writes, now)
  if mode == 'PEEK' then return {} end
  if mode == 'SPEND' then
    if type(writes) == 'function' then return writes() end
    return writes
  end
  if mode == 'REFUND' then return l.algo.refund(l.st, l.spec, now) end
  -- Only a limit without BLOCK gets here: IMPOSE leaves it alone.
  if mode == 'IMPOSE' then return {} end
  local w = {}
  for i = 1, #l.uses do w[i] = { op = 'del', key = i } end
  if l.spec.block then w[#w + 1] = { op = 'delblock' } end
  return w
end

-- What a limit decides in `mode`, and its writes: a list, or a function that makes it
-- (and may raise what only a call that writes meets), as if the limit were alone.
-- With BLOCK: a call while blocked is answered from the block alone; a spending call
-- that is denied, or IMPOSE, starts a block.
local function decide(l, mode, now)
  local b = l.spec.block
  local h = b and blocked(l, now)
  if h and (mode == 'SPEND' or mode == 'PEEK' or mode == 'REFUND') then
    local d, after = while_blocked(b, h, mode, now)
    return d, after and { set_block(after, b, now) } or {}
  end
  if b and mode == 'IMPOSE' then return start_block(l, b, now, 0) end
  local d, verdict = l.algo.decide(l.st, l.spec, now)
  if b and mode == 'SPEND' and not d.allowed then return start_block(l, b, now, 1) end
  return d, function() return plan(l, mode, verdict, now) end
end

local function check_write(l, w)
  if w.op == 'incrby' and not within(str(add(l.st[w.key] or 0, w.by)), I64_MAX) then
    fail("ERR limiter key '" .. l.uses[w.key].name .. "' holds a value that would overflow")
  end
end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function aggregate(ds)
  local allowed, rem, reset, retry, never = true, nil, 0, 0, false
  for _, d in ipairs(ds) do
    if not d.allowed then
      allowed = false
      -- -1 is never; a block's wait may be an exact integer past 2^53 (a table).
      if d.retry == -1 then never = true elseif cmp(d.retry, retry) > 0 then retry = d.retry end
    end
    if rem == nil or cmp(d.remaining, rem) < 0 then rem = d.remaining end
    if cmp(d.reset, reset) > 0 then reset = d.reset end
  end
  if allowed then retry = 0 elseif never then retry = -1 end
  return decision(allowed, rem or 0, retry, reset)
end

-- reset_after_ms of the state as stored: for counted units, the decision on a
-- request of none.
local function own_reset(l, now)
  if l.algo.own_reset then return l.algo.own_reset(l.st, l.spec, now) end
  local nothing = {}
  for k, v in pairs(l.spec) do nothing[k] = v end
  nothing.cost = 0
  return (l.algo.decide(l.st, nothing, now)).reset
end

-- Two limits writing one key would each decide on the state the other is about to change.
local function check_distinct(limits)
  local names = {}
  for _, l in ipairs(limits) do
    if l.st then
      for _, u in ipairs(l.uses) do names[#names + 1] = u.name end
    end
    if l.block_name then names[#names + 1] = l.block_name end
  end
  for i = 1, #names do
    for j = i + 1, #names do
      if names[i] == names[j] then fail("ERR RL.ALL: key '" .. names[i] .. "' is used by more than one limit") end
    end
  end
end

local function run(limits, now, mode, single)
  now = now or server_now()
  for _, l in ipairs(limits) do load(l, now, mode) end
  if not single then check_distinct(limits) end
  local ds, writes = {}, {}
  for i, l in ipairs(limits) do ds[i], writes[i] = decide(l, mode, now) end
  local total = single and ds[1] or aggregate(ds)
  -- A denied RL.ALL writes nothing at all, not even the log's trim, except in a limit
  -- with BLOCK that denied it (its block starts, or counts the strike).
  local refused = mode == 'SPEND' and not single and not total.allowed
  local plans = {}
  for i, l in ipairs(limits) do
    local w = writes[i]
    if refused and (ds[i].allowed or not l.spec.block) then w = {}
    elseif type(w) == 'function' then w = w() end
    for _, x in ipairs(w) do check_write(l, x) end
    plans[i] = w
  end
  for i, l in ipairs(limits) do
    for _, w in ipairs(plans[i]) do apply(l, w) end
  end
  if mode ~= 'SPEND' then
    -- What a PEEK says, on the state as this call left it, with the state's own reset
    -- (the request it would admit not counted).
    for i, l in ipairs(limits) do
      local h = blocked(l, now)
      if h then ds[i] = held_decision(h, now)
      else
        if mode ~= 'PEEK' then
          reload(l)
          ds[i] = l.algo.decide(l.st, l.spec, now)
        end
        ds[i].reset = own_reset(l, now)
      end
    end
    total = single and ds[1] or aggregate(ds)
  end
  return total, ds, now
end

-- A limit's four integers, and with STRIKES those of its current block.
local function answer(l, d, now)
  local r = ints(d)
  if l.spec.block and l.spec.block.STRIKES then
    local h = blocked(l, now)
    r[5] = int(h and h.strikes or 0)
  end
  return r
end

local COMMAND = {
  fixed = 'FIXED', slidecount = 'SLIDECOUNT', slidelog = 'SLIDELOG', gcra = 'GCRA',
  concurrency = 'CONCURRENCY', throttle = 'THROTTLE', counter = 'COUNTER',
  slidewindow = 'SLIDEWINDOW',
  tokenbucket = 'TOKENBUCKET',
}

-- KEYS are the command's keys, or none at all (a standalone caller may leave them out;
-- a cluster client must not, to be routed).
local function check_keys(keys)
  if #KEYS == 0 then return end
  for i, k in ipairs(keys) do
    if KEYS[i] ~= k then fail('ERR redis-rl script: KEYS must be the keys of ARGV, in order (KEYS[' .. i .. '])') end
  end
end

local function main(command)
  local ok, result = pcall(function()
    if command == 'all' then
      if #ARGV < 5 then E_arity('rl.all') end
      local limits, now, mode = parse_all(ARGV)
      local keys = {}
      for i, l in ipairs(limits) do keys[i] = l.key end
      check_keys(keys)
      local total, ds, at = run(limits, now, mode, false)
      local each = {}
      for i, d in ipairs(ds) do each[i] = answer(limits[i], d, at) end
      local r = ints(total)
      r[5] = each
      return r
    end
    local name = 'rl.' .. command
    if #ARGV < 3 then E_arity(name) end
    if #ARGV - 1 > MAX_ARGS then fail("ERR syntax error: too many arguments for '" .. name .. "'") end
    local algo = A[COMMAND[command]]
    local spec, now, mode, member
    if command == 'concurrency' then spec, now, mode, member = parse_concurrency(name, ARGV, 2)
    elseif command == 'throttle' then spec, now, mode = parse_throttle(name, ARGV, 2)
    else spec, now, mode = parse_limiter(name, ARGV, 2, algo) end
    check_keys({ ARGV[1] })
    local limit = { algo = algo, key = ARGV[1], spec = spec, member = member }
    local d, _, at = run({ limit }, now, mode, true)
    if algo.reply then return algo.reply(d) end
    return answer(limit, d, at)
  end)
  if ok then return result end
  if type(result) == 'table' and result.rl then return redis.error_reply(result.rl) end
  -- Redis refuses a script's first write under maxmemory: the module's text for it.
  local text = type(result) == 'table' and result.err or tostring(result)
  if string.sub(text, 1, 4) == 'OOM ' then
    return redis.error_reply("OOM command not allowed when used memory > 'maxmemory'.")
  end
  error(result, 0)
end

return main('slidelog')
