"""Counters kept as events happen (in the event's own commit), and the views read from them."""
