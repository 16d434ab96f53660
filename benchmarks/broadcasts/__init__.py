"""A broadcast to a large segment, spooled end to end by a live `postwire serve` (render,
personalize, DKIM-sign, commit): messages/s, the server's memory, the latency of `POST /emails`
while it runs, a py-spy profile, and the signing ceiling of the same machine. See `__main__.py`.
"""
