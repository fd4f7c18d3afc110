-- POST /api/v1/diagnose with a failure errbook does not know (benches/load/unknown.log,
-- as JSON in PASTE_JSON), for the inbox's capture. GROUPS=new makes each request's
-- exception a new one (a new group: an insert); GROUPS=same only adds a log line (the
-- same group: an update of one row); either way no answer comes from the cache.
local f = assert(io.open(os.getenv("PASTE_JSON") or "paste.json", "rb"))
wrk.method = "POST"
wrk.path = "/api/v1/diagnose"
local body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local new_groups = os.getenv("GROUPS") == "new"
local run = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "unique.lua")
local i = 0
request = function()
  i = i + 1
  local tag = run .. "t" .. thread_id .. "x" .. i
  local b = body
  if new_groups then
    b = b:gsub("ShardFormatError", "Shard" .. tag .. "Error")
  end
  b = b:sub(1, -3) .. "\\nstep " .. tag .. " done\"}"
  return wrk.format(nil, nil, nil, b)
end
