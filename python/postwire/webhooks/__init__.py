"""Webhooks: endpoints a team registers, the signed POSTs that report each event to them, and
the durable outbox between the two."""
