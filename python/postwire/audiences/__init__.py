"""Contacts, segments, topics, contact properties and CSV imports: the rules, over `store/`."""
