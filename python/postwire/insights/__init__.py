"""Deliverability insights: checks of one email (authentication, content, recipients, optional
rspamd scoring), computed once off the send path and stored with the email."""
