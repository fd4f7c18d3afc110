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
-- This run's number, and `thread_id` set for each thread (see unique.lua, next to
-- this script).
local run = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "unique.lua")
local i = 0
request = function()
  if not unique then
    return wrk.format()
  end
  i = i + 1
  -- The body ends with `"}`: add a line inside the JSON string.
  local b = body:sub(1, -3) .. "\\nstep " .. run .. "t" .. thread_id .. "x" .. i .. " done\"}"
  return wrk.format(nil, nil, nil, b)
end
