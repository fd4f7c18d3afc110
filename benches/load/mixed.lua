-- A mix like a team's traffic, every request different: of each 10 requests, 4
-- searches (queries.txt with a unique number, so none is cached), 2 diagnoses (the
-- real paste with a unique line appended), and 4 portal pages (home, an entry, a
-- search page, an entry's JSON). Used by soak.sh.
local queries = {}
for line in io.lines(os.getenv("QUERIES") or "queries.enc") do
  queries[#queries + 1] = line
end
local f = assert(io.open(os.getenv("PASTE_JSON") or "paste.json", "rb"))
local paste = f:read("*a")
f:close()
local entry = os.getenv("ENTRY") or "nccl-watchdog-timeout"
local pages = { "/", "/entries/" .. entry, "/search?q=nccl+timeout", "/api/v1/entries/" .. entry }
local json = { ["Content-Type"] = "application/json" }

-- This run's number, and `thread_id` set for each thread (see unique.lua, next to
-- this script).
local run = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "unique.lua")
local i = 0
request = function()
  i = i + 1
  local kind = i % 10
  local tag = run .. "t" .. thread_id .. "x" .. i
  if kind < 4 then
    local q = queries[(i % #queries) + 1]
    return wrk.format("GET", "/api/v1/search?q=" .. q .. "+n" .. tag)
  elseif kind < 6 then
    -- The body ends with `"}`: add a line inside the JSON string.
    local body = paste:sub(1, -3) .. "\\nstep " .. tag .. " done\"}"
    return wrk.format("POST", "/api/v1/diagnose", json, body)
  else
    return wrk.format("GET", pages[(i % #pages) + 1])
  end
end
