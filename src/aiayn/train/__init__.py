"""Training: the loss, the optimiser and its schedule, and the loop."""
