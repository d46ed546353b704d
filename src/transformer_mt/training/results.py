"""What an evaluation (validation, test, task=evaluate) produces, read by name everywhere."""

from dataclasses import dataclass
from typing import NamedTuple


class Row(NamedTuple):
    """One evaluated sentence: its example id (its line in the split, from 0) and three texts."""

    id: int
    source: str
    reference: str
    hypothesis: str


@dataclass(frozen=True)
class EvalResults:
    """The scores of one evaluation, its sentences in the order of the split, and the sacreBLEU
    signatures that say how BLEU, chrF and TER were computed.

    metrics: `{stage}/loss`, `{stage}/nll`, `{stage}/ppl`, `{stage}/bleu`, `{stage}/chrf`, `{stage}/ter`."""

    metrics: dict[str, float]
    rows: tuple[Row, ...]
    bleu_signature: str
    chrf_signature: str
    ter_signature: str

    def renamed(self, stage: str, split: str) -> "EvalResults":
        """The same results with the metrics named `{split}/...` instead of `{stage}/...`."""
        metrics = {key.replace(f"{stage}/", f"{split}/", 1): value for key, value in self.metrics.items()}
        return EvalResults(metrics, self.rows, self.bleu_signature, self.chrf_signature, self.ter_signature)
