-- POST /api/v1/diagnose with one real paste as JSON (written by load.sh).
local f = assert(io.open(os.getenv("PASTE_JSON") or "paste.json", "rb"))
wrk.method = "POST"
wrk.path = "/api/v1/diagnose"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
