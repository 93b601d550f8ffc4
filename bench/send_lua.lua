-- The control for send_real.lua: the fictional number's send through the same request() path (one table lookup
-- per request), so the two rates differ only by what the server does.
local requests = {}
local i = 0

function init(args)
  for k = 1, 4096 do
    requests[k] = wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=bench",
      { ["Content-Type"] = "application/json" }, '{"phoneNumber":"+16505554567"}')
  end
end

function request()
  i = i % 4096 + 1
  return requests[i]
end
