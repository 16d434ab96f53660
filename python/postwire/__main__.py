"""`python -m postwire`: the same as the `postwire` command."""

from postwire.cli import main

if __name__ == "__main__":
    main()
