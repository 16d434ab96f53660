"""What deliverability insights and event counters cost the mail rate: the SMTP relay and the
batch REST API, with both on and both off, side by side in one run. See `__main__.py`."""
