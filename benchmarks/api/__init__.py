"""REST API throughput of a live `postwire serve`, driven by `wrk` from another process.

Three figures side by side in one run: `GET /health` (a bare Quart-Trio route on the same server,
the framework's ceiling), single `POST /emails` (validation, MIME, DKIM RSA-2048, durable group
commit) and `POST /emails/batch` with 100 emails a call. See `__main__.py`.
"""
