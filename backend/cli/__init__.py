"""The ``limbic-memory`` command line (``main``) and the tools it runs: the demo replay,
``doctor``, the remote client used while a server owns the data directory, and the GIST
conformance runner. This package sits above the web layer and may use any of it."""
