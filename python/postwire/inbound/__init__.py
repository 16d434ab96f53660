"""Mail that comes back: delivery status notifications (RFC 3464) and feedback-loop reports
(ARF, RFC 5965) received on port 25.

- `reports.parse_report(bytes)` is pure: it reads a message into a `DeliveryStatusReport` or a
  `FeedbackReport`, or returns None for anything else; it never raises on its input.
- `apply.apply_report(spool, report, rcpt_to, now_ms)` finds the email the report is about
  through its VERP return path (`bounces+<email_id>@<return_path>.<domain>`) and commits its
  events (`email.bounced`, `email.delivery_delayed`, `email.complained`), the email's
  `last_event` and any suppressions in one batch.
"""
