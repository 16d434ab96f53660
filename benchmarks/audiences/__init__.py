"""An import of a million contacts from CSV through a live `postwire serve`: contacts/s, the
server's peak memory and a py-spy profile. See `__main__.py`."""
