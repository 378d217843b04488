"""The pure memory engine: scoring, decay, GIST diversity, retrieval and the save gate.

Nothing here does I/O, reads the clock, draws random numbers or imports another part of
``backend``: every function takes what it needs (``now`` included) as arguments.
"""
