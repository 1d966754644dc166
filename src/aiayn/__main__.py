"""`python -m aiayn` is the `aiayn` command."""

from aiayn.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
