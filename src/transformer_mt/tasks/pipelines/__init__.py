"""The parts of the pipelines (task=distill, task=backtranslate): a stage's folder and the
fingerprint of its inputs, a synthetic corpus translated chunk by chunk, a stage's run config
composed as run.py would, and a training run in a stage with its comparison against a baseline."""
