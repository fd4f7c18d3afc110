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
  i = i + 1
  local q = queries[(i % #queries) + 1]
  if unique then
    q = q .. "+n" .. run .. "t" .. thread_id .. "x" .. i
  end
  return wrk.format("GET", path .. q)
end
