"""Postwire with its tables on LMDB against PostgreSQL: sending and lists, side by side."""
