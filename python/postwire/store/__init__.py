"""Python face of the spool and the tables kept beside it."""

from postwire.store.spool import TABLES, Spool, serve_spool
from postwire.store.tables import Table

__all__ = ["TABLES", "Spool", "Table", "serve_spool"]
