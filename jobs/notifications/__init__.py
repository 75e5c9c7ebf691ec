"""Word when a job ends, waits too long, or a study finds a better trial.

A project's admins keep its notification rules (``rules``: REST, CLI, page); a watcher in the web
process (``watch``) notices the events from the jobs' own rows, records one delivery per rule and
event (once, whichever process noticed it first), and sends it to the rule's webhook (JSON, signed
with the rule's secret, or a Slack-compatible body) and e-mail addresses, retrying with backoff.
Nothing here is in a job's path: a slow or failing target delays only its own deliveries.
"""
