"""The dashboard: server-rendered pages on their own listener (`dashboard.listen`)."""
