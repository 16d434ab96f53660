"""Python face of the spool and the tables kept beside it."""

from postwire.store.spool import TABLES, Spool, serve_spool

__all__ = ["TABLES", "Spool", "serve_spool"]
