"""SMTP submission throughput over implicit TLS: Postfix's `smtp-source` behind an `stunnel`
client drives a live `postwire serve` (and Postfix, as the baseline) that delivers to
`smtp-sink`. See `__main__.py`."""
