-- POST /api/v1/diagnose with the example pastes of every real entry in turn (written
-- by load.sh into pastes.jsonl, one JSON body a line), each made new with a log line
-- of its own: traffic as varied as a team's, where the words of one paste are not all
-- those of the last. (diagnose.lua sends one paste, so every request asks for the same
-- words but one.)
local bodies = {}
for line in io.lines(os.getenv("PASTES") or "pastes.jsonl") do
  if #line > 0 then
    bodies[#bodies + 1] = line
  end
end
wrk.method = "POST"
wrk.path = "/api/v1/diagnose"
wrk.headers["Content-Type"] = "application/json"
-- This run's number, and `thread_id` set for each thread (see unique.lua, next to
-- this script).
local run = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "unique.lua")
local i = 0
request = function()
  i = i + 1
  -- Each thread starts at its own place in the list.
  local body = bodies[((i + thread_id * 97) % #bodies) + 1]
  -- The body ends with `"}`: add a line inside the JSON string.
  local b = body:sub(1, -3) .. "\\nstep " .. run .. "t" .. thread_id .. "x" .. i .. " done\"}"
  return wrk.format(nil, nil, nil, b)
end
