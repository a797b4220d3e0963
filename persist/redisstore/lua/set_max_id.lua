-- Sets KEYS[1] to the stream id ARGV[1] unless it already holds a later one,
-- so that concurrent writers only ever move a cursor forward.
-- Returns the value the key holds afterwards.
local function later(a, b) -- is stream id a after b?
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  if tonumber(ams) ~= tonumber(bms) then return tonumber(ams) > tonumber(bms) end
  return tonumber(aseq) > tonumber(bseq)
end
local cur = redis.call('GET', KEYS[1])
if not cur or later(ARGV[1], cur) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return cur
