"""The parts of the Lightning jobs (task=train, task=evaluate) and of what reads their run
directories: building the run, checking its config, `model.init_from`, what a run writes and
prints, routing Lightning's log lines, wandb, and a sweep's jobs as rows (task=report)."""
