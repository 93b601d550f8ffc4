-- sendVerificationCode for the fictional number (no limits apply).
wrk.method = "POST"
wrk.path = "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=bench"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"phoneNumber":"+16505554567"}'
