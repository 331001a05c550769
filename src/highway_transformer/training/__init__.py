"""Training: the one trainer that runs every task, its optimisers and schedules, gradient
accumulation, resumable checkpoints, the divergence policy, run-folder ownership, metrics
writers, stop signals and the multi-process launcher."""
