"""Sending domains below the HTTP layer: their DNS records, their storage, their verification.

- `records`: pure; the records a domain publishes, name rules, statuses and the policy.
- `store`: domains in the spool, per team; the contract's JSON.
- `verification`: DNS checks, and `serve_domain_verifier`, which keeps statuses current.

Import from the submodules: the package itself imports none of them, so storing a domain does
not load the verifier's service.
"""
