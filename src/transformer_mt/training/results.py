"""What an evaluation (validation, test, task=evaluate) produces, read by name everywhere."""

from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.distributed as dist


class ScoredSentence(NamedTuple):
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
    rows: tuple[ScoredSentence, ...]
    bleu_signature: str
    chrf_signature: str
    ter_signature: str

    def renamed(self, stage: str, split: str) -> "EvalResults":
        """The same results with the metrics named `{split}/...` instead of `{stage}/...`."""
        metrics = {key.replace(f"{stage}/", f"{split}/", 1): value for key, value in self.metrics.items()}
        return EvalResults(metrics, self.rows, self.bleu_signature, self.chrf_signature, self.ter_signature)


@dataclass
class Evaluation:
    """What an evaluation collects batch by batch: the sums of its token losses (on the device: no
    host read per batch) and its rows, then summed and gathered over the ranks once."""

    device: torch.device
    loss_sum: torch.Tensor = field(init=False)  # label-smoothed loss, summed over target tokens
    nll_sum: torch.Tensor = field(init=False)  # negative log-likelihood, summed over target tokens
    tokens: torch.Tensor = field(init=False)  # target tokens
    rows: list[ScoredSentence] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.loss_sum, self.nll_sum, self.tokens = (torch.zeros((), dtype=torch.float64, device=self.device)
                                                    for _ in range(3))

    def add(self, loss_sum: torch.Tensor, nll_sum: torch.Tensor, tokens: torch.Tensor,
            rows: list[ScoredSentence]) -> None:
        self.loss_sum += loss_sum.double()
        self.nll_sum += nll_sum.double()
        self.tokens += tokens.double()
        self.rows.extend(rows)

    def gathered(self) -> tuple[float, float, float, list[ScoredSentence]]:
        """Loss sum, NLL sum and tokens over every rank (one all-reduce), and every rank's rows in
        example-id order, each once (a distributed sampler may repeat a few)."""
        sums, rows = torch.stack([self.loss_sum, self.nll_sum, self.tokens]), self.rows
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, rows)
            rows = [ScoredSentence(*row) for part in gathered for row in part]
        loss_sum, nll_sum, tokens = sums.tolist()
        return loss_sum, nll_sum, tokens, sorted({row.id: row for row in rows}.values())
