"""The dashboard's Emails page under load: `python -m benchmarks.dashboard`."""
