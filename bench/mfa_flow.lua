-- The SMS second-factor sign-in: signInWithPassword (an enrolled user: mfaPendingCredential, no tokens), then
-- mfaSignIn:start with that credential, then mfaSignIn:finalize with the fictional number's preset code. One RSA
-- signature per flow (the finalize). The bench creates the user first (bench/measure.py). Each thread keeps queues of
-- pending credentials and MFA sessions; a finalize pairs a credential with a session of the same user.
local signIn = wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=bench",
  { ["Content-Type"] = "application/json" }, '{"email":"bench-mfa@example.com","password":"secret1","returnSecureToken":true}')
local creds = {}
local sessions = {}
local starting = 0
local enrollment = nil
local threads = {}
flows = 0
failures = 0

function setup(thread) table.insert(threads, thread) end

function request()
  if #sessions > 0 and #creds > 0 then
    local s = table.remove(sessions)
    local c = table.remove(creds)
    return wrk.format("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize?key=bench",
      { ["Content-Type"] = "application/json" },
      '{"mfaPendingCredential":"' .. c .. '","phoneVerificationInfo":{"sessionInfo":"' .. s .. '","code":"123456"}}')
  end
  if #creds > #sessions + starting and enrollment then
    starting = starting + 1
    return wrk.format("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:start?key=bench",
      { ["Content-Type"] = "application/json" },
      '{"mfaPendingCredential":"' .. creds[1] .. '","mfaEnrollmentId":"' .. enrollment .. '"}')
  end
  return signIn
end

function response(status, headers, body)
  local c = body:match('"mfaPendingCredential":"([^"]+)"')
  if c then
    enrollment = enrollment or body:match('"mfaEnrollmentId":"([^"]+)"')
    table.insert(creds, c)
    return
  end
  local s = body:match('"sessionInfo":"([^"]+)"')
  if s then
    starting = math.max(0, starting - 1)
    table.insert(sessions, s)
  elseif status == 200 and body:find('"idToken"', 1, true) then
    flows = flows + 1
  else
    if body:find("mfaSignIn", 1, true) == nil and starting > 0 then starting = starting - 1 end
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
