"""SMTP submission throughput over implicit TLS: Postfix's `smtp-source` behind an `stunnel`
client drives a live `postwire serve` (and the baselines: Postfix with an OpenDKIM milter, and
Postfix alone) that delivers to `smtp-sink`. See `__main__.py`."""
