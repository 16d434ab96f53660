"""Mail that comes back: delivery status notifications (RFC 3464) and feedback-loop reports
(ARF, RFC 5965) received on port 25.

- `verp` makes and checks the return paths (`bounces+<email_id>-<tag>@<return_path>.<domain>`,
  the tag a MAC under the spool's secret), so nobody else can name an email in one.
- `reports.parse_report(bytes)` is pure: it reads a message into a `DeliveryStatusReport` or a
  `FeedbackReport`, or returns None for anything else; it never raises on its input.
- `apply.apply_report(spool, key, report, rcpt_to, now_ms)` finds the email the report is about
  through its return path and commits its events (`email.bounced`, `email.delivery_delayed`,
  `email.complained`), the email's `last_event`, any suppressions and the marks that make it
  apply once, in one batch.
"""
