"""Postwire: self-hosted, high-throughput email delivery."""


def __getattr__(name: str) -> str:
    # `__version__` is read from the installed metadata on first use: importing
    # importlib.metadata costs a fifth of an operator command's start, and most need no version.
    if name != "__version__":
        raise AttributeError(f"module 'postwire' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("postwire")
    except PackageNotFoundError:  # running from a source tree without installation
        found = "0.0.0"
    globals()["__version__"] = found
    return found
