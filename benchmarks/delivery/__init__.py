"""Delivery throughput of a live `postwire serve`: batch REST API -> spool -> delivery engine ->
Postfix's `smtp-sink` on loopback, with 4 KiB and 100 KiB messages. See `__main__.py`.
"""
