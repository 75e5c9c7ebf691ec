"""Scaled mode: Celery workers on many hosts, placement with capacity, and surviving worker loss.

- ``placement``: gang placement over what workers offer (pure).
- ``capacity``: what live workers offer now, read from the database.
- ``coordinator``: the elected coordinator (admission, leases, restarts, watching jobs).
- ``agent``: what runs inside ``aiconsole worker`` (heartbeat, starting and stopping replicas).
- ``tasks``: the Celery app and the tasks the coordinator sends to one worker's queue.
"""
