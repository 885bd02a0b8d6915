-- wrk script: a place + release mix against `toposched serve` (docs/performance.md).
-- Each request alternates: POST /v1/jobs places job w<thread>-<n> (sizes cycle through
-- 1..16 GPUs), DELETE releases the job this thread placed LAG posts earlier, which has long
-- been answered, so the occupancy stays where the prefill left it (~90%). Every request is
-- a committed decision.
local LAG = 200
local sizes = {1, 2, 4, 8, 16, 8, 4, 2}
local threads = {}
local counter = 0
local next_id = 0

function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  placed = 0
  released = 0
end

request = function()
  counter = counter + 1
  local n = math.floor((counter + 1) / 2)
  if counter % 2 == 1 or n <= LAG then
    local body = string.format('{"job":"w%d-%d","gpus":%d}', tid, counter, sizes[counter % #sizes + 1])
    return wrk.format("POST", "/v1/jobs", {["Content-Type"] = "application/json"}, body)
  end
  -- the POST sent LAG pairs ago carried counter - 2*LAG - 1
  return wrk.format("DELETE", string.format("/v1/jobs/w%d-%d", tid, counter - 2 * LAG - 1))
end
