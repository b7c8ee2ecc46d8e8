-- Loaded by every wrk run of the bench. Optional request shape from the environment
-- (WRK_METHOD, WRK_BODY, WRK_CONTENT_TYPE, WRK_AUTHORIZATION); at the end, one line
-- "BENCH_JSON {...}" with the figures bench/lib/wrk.js reads (latencies in microseconds).
local method = os.getenv("WRK_METHOD")
local body = os.getenv("WRK_BODY")
local contentType = os.getenv("WRK_CONTENT_TYPE")
local authorization = os.getenv("WRK_AUTHORIZATION")

if method and method ~= "" then wrk.method = method end
if body and body ~= "" then wrk.body = body end
if contentType and contentType ~= "" then wrk.headers["Content-Type"] = contentType end
if authorization and authorization ~= "" then wrk.headers["Authorization"] = authorization end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"durationUs":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"mean":%.2f,"stdev":%.2f,"min":%d,"p50":%d,"p75":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.min,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max))
end
