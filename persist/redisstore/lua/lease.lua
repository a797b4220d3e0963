-- lease.lua: KEYS[1] a lease, ARGV[1] who asks, ARGV[2] its time to live
-- in milliseconds. The holder keeps it (its time to live starts again);
-- anyone takes it when nobody holds it. 1: ARGV[1] holds it now; 0: another.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
