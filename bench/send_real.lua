-- sendVerificationCode for rotating non-fictional numbers (+1555…): the inbox path (send policy, a random code,
-- the inbox indexes by number). Each thread cycles through 4096 distinct numbers of its own, prebuilt in init() so
-- the per-request Lua work is one table lookup; send_lua.lua pays the same for the fictional number (the control).
local requests = {}
local i = 0
local nextThread = 0

function setup(thread)
  thread:set("tid", nextThread)
  nextThread = nextThread + 1
end

function init(args)
  for k = 1, 4096 do
    local n = (tid or 0) * 4096 + k
    requests[k] = wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=bench",
      { ["Content-Type"] = "application/json" }, string.format('{"phoneNumber":"+1555%07d"}', n))
  end
end

function request()
  i = i % 4096 + 1
  return requests[i]
end
