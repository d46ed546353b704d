"""The `decoding` group (conf/decoding/*.yaml, also chosen as decoding@val_decoding): one node per
search (decoding/greedy.py, beam.py, sampling.py), each with the `options` every search takes
(decoding/search.py's SearchOptions). Each option's YAML extends its node here (its defaults list
names schema_decoding_NAME), so the keys, defaults and rules are these."""

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, Refusal, number

SHORTLIST = ("true: the output layer of each batch holds only its candidates (the lexical table beside the "
             "checkpoint: task=shortlist builds it)")


@dataclass
class SearchOptionsNode(Group):
    """What every search takes: the rules its outputs obey and how it runs the model."""

    _target_: Any = key("transformer_mt.decoding.SearchOptions", "the options' class")
    max_len_a: Any = key(1.2, "outputs of at most max_len_a * source length + max_len_b tokens (the source "
                              "length counts EOS)", (number(0.0), "a number >= 0"))
    max_len_b: Any = key(10, "see max_len_a", AT_LEAST_0)
    min_len: Any = key(0, "no EOS before this many tokens", AT_LEAST_0)
    no_repeat_ngram_size: Any = key(0, "n > 0: no n-gram twice in an output", AT_LEAST_0)
    use_cache: Any = key(True, "the incremental KV cache (false: the prefix decoded again every step; the same "
                               "outputs, for tests and benchmarks)", BOOLEAN)
    check_every: Any = key(None, "steps between the host's looks at which sentences ended; null: 1 on a CPU, 8 on a "
                                 "GPU (sampling: 1, its draws depend on it)", AT_LEAST_1, nullable=True)
    static_step: Any = key(None, "the compiled decoder step on static shapes (CUDA graphs); null: on a GPU only",
                           BOOLEAN, nullable=True)


@dataclass
class GreedyNode(Group):
    """decoding=greedy: the most likely token at every step."""

    _target_: Any = key("transformer_mt.decoding.GreedySearch", "the search's class")
    shortlist: Any = key(False, SHORTLIST, BOOLEAN)
    options: Any = key(SearchOptionsNode(), "what every search takes (decoding.options.*)")


@dataclass
class BeamNode(Group):
    """decoding=beam: beam search with the paper's settings (beam 4, length penalty 0.6, outputs of at most
    input + 50 tokens); scores normalized fairseq-style (PowerLength: logprob / len ** alpha, len counts
    EOS); the paper's GNMT penalty: decoding.length_norm._target_=transformer_mt.decoding.GnmtLength."""

    _target_: Any = key("transformer_mt.decoding.BeamSearch", "the search's class")
    beam_size: Any = key(4, "hypotheses kept per sentence", AT_LEAST_1)
    nbest: Any = key(1, "best hypotheses returned per sentence (1 to beam_size)", AT_LEAST_1)
    constraints: Any = key(False, "true: input lines are source<TAB>phrase<TAB>..., every output contains each "
                                  "phrase", BOOLEAN)
    shortlist: Any = key(False, SHORTLIST, BOOLEAN)
    length_norm: Any = key({"_target_": "transformer_mt.decoding.PowerLength", "alpha": 0.6},
                           "how a finished hypothesis' score is normalized by its length: PowerLength (fairseq's, "
                           "logprob / len ** alpha) or GnmtLength (the paper's)")
    options: Any = key(SearchOptionsNode(max_len_a=1.0, max_len_b=50), "what every search takes (decoding.options.*)")

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """nbest of the beam's hypotheses: at most beam_size."""
        if node.nbest > node.beam_size:
            return f"{prefix}nbest={node.nbest}: must be between 1 and {prefix}beam_size={node.beam_size}"
        return None


@dataclass
class SampleNode(Group):
    """decoding=sample: each token drawn after temperature, top_k (0: off) and nucleus top_p (1.0: off); nbest
    samples per sentence ranked by their log-probability; a fixed seed reproduces the draws."""

    _target_: Any = key("transformer_mt.decoding.Sampling", "the search's class")
    temperature: Any = key(1.0, "the distribution's temperature", (number(0.0, low_open=True), "a number > 0"))
    top_k: Any = key(0, "draw among the k likeliest tokens (0: all)", AT_LEAST_0)
    top_p: Any = key(0.9, "draw within the nucleus of this probability (1.0: all)",
                     (number(0.0, 1.0, low_open=True), "a number in (0, 1]"))
    seed: Any = key(0, "the draws' seed (null: unseeded)", AT_LEAST_0, nullable=True)
    nbest: Any = key(1, "samples per sentence", AT_LEAST_1)
    shortlist: Any = key(False, SHORTLIST, BOOLEAN)
    options: Any = key(SearchOptionsNode(), "what every search takes (decoding.options.*)")


SEARCHES = {"greedy": GreedyNode, "beam": BeamNode, "sample": SampleNode}
