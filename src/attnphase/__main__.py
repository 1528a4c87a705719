"""``python -m attnphase`` entry point."""

from attnphase.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
