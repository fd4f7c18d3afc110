-- POST /api/v1/diagnose with one real paste as JSON (written by load.sh). With
-- UNIQUE=1 every request appends a different log line to the paste, so no answer
-- comes from the cache of recent pastes.
local f = assert(io.open(os.getenv("PASTE_JSON") or "paste.json", "rb"))
wrk.method = "POST"
wrk.path = "/api/v1/diagnose"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local unique = os.getenv("UNIQUE") == "1"
local body = wrk.body
-- A number of this run of wrk, so that a run does not repeat the requests of the
-- run before it (a warm-up), whose answers the server would still hold.
local function run_token()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(4) or tostring(os.time())
  if f then f:close() end
  local n = 0
  for k = 1, #bytes do n = n * 256 + bytes:byte(k) end
  return tostring(n % 100000000)
end
local run = run_token()
local i = 0
-- A global, not a local: `thread:set` in `setup` sets the global of each thread.
thread_id = 0
setup = function(thread)
  thread:set("thread_id", thread_id)
  thread_id = thread_id + 1
end
request = function()
  if not unique then
    return wrk.format()
  end
  i = i + 1
  -- The body ends with `"}`: add a line inside the JSON string.
  local b = body:sub(1, -3) .. "\\nstep " .. run .. "t" .. thread_id .. "x" .. i .. " done\"}"
  return wrk.format(nil, nil, nil, b)
end
