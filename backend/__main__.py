"""``python -m backend``: the ``limbic-memory`` command line (``backend.cli.main``)."""

from backend.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
