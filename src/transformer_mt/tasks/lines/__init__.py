"""The parts of the line-by-line tasks (task=translate, task=score): reading input lines and
writing output files, sentence pairs, target prefixes, lines longer than the model takes, and
Pharaoh alignments."""
