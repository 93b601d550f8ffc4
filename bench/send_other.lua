-- sendVerificationCode for another project (admin targetProjectId), rotating over four projects: the rate a project
-- without a blocking function keeps while another project's function hangs (bench/run --blocking).
local n = 0
function request()
  n = n + 1
  return wrk.format("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=bench",
    { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer owner" },
    '{"phoneNumber":"+16505554567","targetProjectId":"bench-other-' .. (n % 4) .. '"}')
end
