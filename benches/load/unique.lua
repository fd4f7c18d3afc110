-- Shared by the load scripts (`dofile`d by each): what makes their requests new.
-- Returns a number of this run of wrk, so that a run does not repeat the requests of
-- the run before it (a warm-up), whose answers the server would still hold; and
-- numbers the threads, as the global `thread_id` of each (a global, not a local:
-- `thread:set` in `setup` sets the global of each thread).
thread_id = 0
setup = function(thread)
  thread:set("thread_id", thread_id)
  thread_id = thread_id + 1
end

local f = io.open("/dev/urandom", "rb")
local bytes = f and f:read(4) or tostring(os.time())
if f then f:close() end
local n = 0
for k = 1, #bytes do n = n * 256 + bytes:byte(k) end
return tostring(n % 100000000)
