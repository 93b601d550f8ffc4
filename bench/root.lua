wrk.method = "GET"
wrk.path = "/"
