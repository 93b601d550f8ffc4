wrk.method = "GET"
wrk.path = "/static.json"
