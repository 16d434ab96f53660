"""What an email is made of, below both front doors (the REST API and SMTP submission).

- `addresses`: mailbox and address rules, the same for every way in.
- `header_text`: what may stand in a header value.
- `request`: a validated send (`SendRequest`), whatever door it came through.
- `message`: a `SendRequest` to RFC 5322 bytes, through `postwire._core.build_message`.
- `html_text`: the plain-text rendering of an HTML body.
"""
