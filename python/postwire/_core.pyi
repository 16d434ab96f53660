"""Typed stub of `postwire._core`, the Rust extension. It is the documentation of the Rust API.

Errors raised by the extension are the classes of `postwire.errors`.
"""

# --- ids ---------------------------------------------------------------------------------------

def new_id() -> str:
    """A fresh random UUID v4 string (the id format of every resource)."""

# --- mime --------------------------------------------------------------------------------------

# --- dkim --------------------------------------------------------------------------------------

# --- spool -------------------------------------------------------------------------------------
