"""A job's log: filters and keyset reads, live WebSockets, the long-poll API the CLI streams from."""
