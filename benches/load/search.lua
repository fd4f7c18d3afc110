-- GET /api/v1/search with a different query each request (queries.txt, URL-encoded
-- by load.sh into queries.enc). With UNIQUE=1 every request also carries a number no
-- entry holds, so no two requests are the same and no answer comes from the cache.
-- SEARCH_PATH replaces the path before the query (compare-tantivy.sh points it at
-- tantivy-cli's `/api/?nhits=10&q=`).
local queries = {}
for line in io.lines(os.getenv("QUERIES") or "queries.enc") do
  queries[#queries + 1] = line
end
local unique = os.getenv("UNIQUE") == "1"
local path = os.getenv("SEARCH_PATH") or "/api/v1/search?q="
-- This run's number, and `thread_id` set for each thread (see unique.lua, next to
-- this script).
local run = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "unique.lua")
local i = 0
request = function()
  i = i + 1
  local q = queries[(i % #queries) + 1]
  if unique then
    q = q .. "+n" .. run .. "t" .. thread_id .. "x" .. i
  end
  return wrk.format("GET", path .. q)
end
