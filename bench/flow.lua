-- The full phone flow: sendVerificationCode, then signInWithPhoneNumber with the returned sessionInfo.
-- Each thread keeps a queue of sessions; every 200 sign-in counts as one flow (summed in done()).
local send = wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=bench",
  { ["Content-Type"] = "application/json" }, '{"phoneNumber":"+16505554567"}')
local pending = {}
local threads = {}
flows = 0
failures = 0

function setup(thread) table.insert(threads, thread) end

function request()
  local s = table.remove(pending)
  if s then
    return wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=bench",
      { ["Content-Type"] = "application/json" }, '{"sessionInfo":"' .. s .. '","code":"123456"}')
  end
  return send
end

function response(status, headers, body)
  local s = body:match('^{"sessionInfo":"([^"]+)"')
  if s then
    table.insert(pending, s)
  elseif status == 200 and body:find('"idToken"', 1, true) then
    flows = flows + 1
  else
    failures = failures + 1
  end
end

function done(summary, latency, requests)
  local total, failed = 0, 0
  for _, t in ipairs(threads) do
    total = total + t:get("flows")
    failed = failed + t:get("failures")
  end
  io.write(string.format("FLOWS %d FAILURES %d\n", total, failed))
end
