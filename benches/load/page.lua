-- GET portal pages in turn: home, an entry (ENTRY, set by load.sh), a search, a tag.
local entry = os.getenv("ENTRY") or "nccl-watchdog-timeout"
local paths = { "/", "/entries/" .. entry, "/search?q=nccl+timeout", "/api/v1/entries/" .. entry }
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1])
end
