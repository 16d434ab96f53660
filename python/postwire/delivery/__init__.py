"""Delivery to recipients' mail servers.

- `retry_policy`: pure; when a message that failed temporarily is tried again, and when to give up.
- `bounces`: pure; what an SMTP reply or a connection failure means for a message and its address.
- `pool_sizing`: pure; how many connections a destination's queue deserves.
- `resolver`: `MxResolver`, the candidate hosts and addresses for a recipient domain (MX,
  implicit MX, null MX, `delivery.routes`), with a TTL-respecting cache.
"""
