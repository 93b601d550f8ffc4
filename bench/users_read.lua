-- Reads over the users stored by a make_export.py import of BENCH_USERS users (bench/measure.py --scaling), one
-- kind per run, chosen by BENCH_READ:
--   search        console user search with a varying q (a phone prefix, a display name, a uid prefix, no match)
--   search_empty  console user search with an empty q (the first page of everyone)
--   lookup        admin accounts:lookup by phoneNumber
--   batchget      admin accounts:batchGet pages of 100 after a random user's uid (the nextPageToken)
--   query         admin accounts:query with a phoneNumber expression
-- Each thread prebuilds 4096 requests of random users in init(), so the per-request Lua work is one table lookup.
local kind = os.getenv("BENCH_READ") or "search"
local users = tonumber(os.getenv("BENCH_USERS") or "1000")
local requests = {}
local i = 0
local nextThread = 0
local admin = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer owner" }

function setup(thread)
  thread:set("tid", nextThread)
  nextThread = nextThread + 1
end

local function one(k)
  local n = math.random(0, users - 1)
  local phone = string.format("+1555%07d", n)
  if kind == "search" then
    local q
    local m = k % 4
    if m == 0 then q = string.sub(phone, 1, 8 + math.floor(k / 4) % 4)  -- a phone prefix (many matches)
    elseif m == 1 then q = "Test%20User%20" .. n                      -- a display name
    elseif m == 2 then q = string.format("u%08d", math.floor(n / 100)) -- a uid prefix (100 matches)
    else q = "nobody" .. n end                                        -- no match
    return wrk.format("GET", "/emulator/v1/projects/demo-phone/users?q=" .. q:gsub("%+", "%%2B") .. "&pageSize=50")
  elseif kind == "search_empty" then
    return wrk.format("GET", "/emulator/v1/projects/demo-phone/users?q=&pageSize=50")
  elseif kind == "lookup" then
    return wrk.format("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", admin,
      '{"phoneNumber":["' .. phone .. '"]}')
  elseif kind == "batchget" then
    return wrk.format("GET", string.format(
      "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?maxResults=100&nextPageToken=u%010dLoadTestUserXyz", n),
      { ["Authorization"] = "Bearer owner" })
  elseif kind == "query" then
    return wrk.format("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:query", admin,
      '{"expression":[{"phoneNumber":"' .. phone .. '"}],"limit":10}')
  end
  error("BENCH_READ: unknown kind " .. kind)
end

function init(args)
  math.randomseed(1234 + (tid or 0))
  for k = 1, 4096 do requests[k] = one(k) end
end

function request()
  i = i % 4096 + 1
  return requests[i]
end
