"""Web access (``trainingInput.enableWebAccess``): a shell in the browser into a running replica.

The process that runs a replica (the executor in embedded mode, a worker in scaled mode) offers
shells into it on a port of its host (``host``); the web process's WebSocket (``consumer``) opens
one for a user who may change the job, relays the terminal's bytes both ways, records them and
writes the audit log (``sessions``). The two speak a small framed protocol, admitted by a token
signed with the console's secret key that is good once and for seconds (``protocol``).
"""
