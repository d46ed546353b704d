"""The parts of the pipelines (task=distill): a stage's folder and the fingerprint of its inputs, a
synthetic corpus translated chunk by chunk, and a stage's run config composed as run.py would."""
