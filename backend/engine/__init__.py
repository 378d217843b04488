"""The turn: activation ∥ hippocampus, the main model's stream, the merge and the save gate."""
