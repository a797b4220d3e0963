-- release_lease.lua: KEYS[1] a lease, ARGV[1] who gives it up. Only its
-- holder can: a lease that expired and was taken by another stays theirs.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
