-- One fixed request per connection, formatted once per wrk thread.
-- Usage: wrk -s request.lua URL -- METHOD PATH BODY_FILE ("-" for none)
-- The bearer token comes from $BENCH_API_TOKEN, a Cookie header (the dashboard's session) from
-- $BENCH_COOKIE, so they stay off the command line.

function init(args)
  wrk.method = args[1]
  wrk.path = args[2]
  if args[3] ~= "-" then
    local file = assert(io.open(args[3], "rb"))
    wrk.body = file:read("*a")
    file:close()
    wrk.headers["Content-Type"] = "application/json"
  end
  local token = os.getenv("BENCH_API_TOKEN")
  if token and token ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. token
  end
  local cookie = os.getenv("BENCH_COOKIE")
  if cookie and cookie ~= "" then
    wrk.headers["Cookie"] = cookie
  end
end

-- No response() callback: parsing every reply in Lua would cost the generator CPU the server
-- needs. Non-2xx/3xx replies are still counted by wrk (errors.status).
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT {\"requests\": %d, \"duration_us\": %d, \"status_errors\": %d, " ..
    "\"connect_errors\": %d, \"read_errors\": %d, \"write_errors\": %d, \"timeouts\": %d, " ..
    "\"p50_us\": %d, \"p90_us\": %d, \"p99_us\": %d, \"max_us\": %d}\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
