"""Broadcasts: a durable job that walks a segment, personalizes, signs and enqueues."""
