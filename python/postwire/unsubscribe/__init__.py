"""Signed unsubscribe links, RFC 8058 one-click unsubscribe and the hosted page."""
