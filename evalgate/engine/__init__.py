"""Everything that talks HTTP to an engine, a router or a worker; nothing else does.

http.py       the one HTTP layer (aiohttp): total deadlines, connect deadline, TCP
              keepalive, the cap on decoded answers, proxies from the environment
retry.py      what is retried and how long; the errors a request can end in
urls.py       API and server roots, credentials out of URLs, the one Authorization header
request.py    the body of a generation request: one builder for the probe and the eval
client.py     EvalClient: the eval's requests and the probe (read to its first event), one client
answers.py    an answer decoded into typed values
wire.py       an engine's error answer, whichever engine sent it
discovery.py  /readiness, /v1/models, /tokenize, /version, typed where they enter
cards.py      a /v1/models answer's cards, and the rule that picks the model's
readiness.py  waiting until the endpoint serves the model
workers.py    the workers behind a router, watched during the eval
"""
