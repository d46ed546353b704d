"""Every search implements the Search protocol (decoding/strategy.py) and declares what it can do;
whoever runs one reads the declaration, never its class: a search without constraints refuses
phrases, and no module of src asks for a search's or an engine's class or probes it with getattr."""

import ast
from pathlib import Path

import pytest
import torch

from tests.decoding.toy_models import BOS, EOS, MarkovModel
from transformer_mt.decoding import BeamSearch, GnmtLength, GreedySearch, Sampling, SearchOptions
from transformer_mt.decoding.strategy import Search, SearchCapabilities

SRC = Path(__file__).resolve().parents[2] / "src" / "transformer_mt"
ROLES = {"BeamSearch", "GreedySearch", "Sampling", "Translator", "Ct2Translator", "Search", "Engine"}


@pytest.mark.parametrize("search, declared, nbest", [
    (GreedySearch(), SearchCapabilities(), 1),
    (BeamSearch(3, GnmtLength(), nbest=2), SearchCapabilities(nbest=True, beams=True, constraints=True), 2),
    (Sampling(nbest=3), SearchCapabilities(nbest=True, random=True), 3),
])
def test_every_search_is_a_search_and_declares_what_it_can_do(search, declared, nbest):
    assert Search in type(search).__mro__
    assert search.capabilities == declared and search.nbest == nbest and search.shortlist is False
    assert isinstance(search.options, SearchOptions)


@pytest.mark.parametrize("search", [GreedySearch(SearchOptions(max_len_b=3)), Sampling(seed=1, options=SearchOptions(
    max_len_b=3))])
def test_a_search_without_constraints_refuses_phrases_and_takes_rows_without_any(search):
    model, src = MarkovModel({1: {BOS: {3: 0.9, EOS: 0.1}, 3: {EOS: 1.0}}}), torch.tensor([[1, EOS], [1, EOS]])
    with pytest.raises(ValueError, match="takes no constraints"):
        search(model, src, BOS, EOS, constraints=[[(3,)], []])
    assert [h[0].tokens for h in search(model, src, BOS, EOS, constraints=[[], []])] == \
        [h[0].tokens for h in search(model, src, BOS, EOS)]


def probes(tree: ast.AST) -> list[str]:
    """Each `isinstance(x, C)` naming a search or engine class, and each `getattr(x, "name", ...)`
    on a search or an engine (an attribute of `search`, `translator`, `engine`, `default`)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2):
            continue
        second, first = node.args[1], ast.unparse(node.args[0])
        classes = second.elts if isinstance(second, ast.Tuple) else [second]
        if node.func.id == "isinstance" and {ast.unparse(c).split(".")[-1] for c in classes} & ROLES:
            found.append(ast.unparse(node))
        if node.func.id == "getattr" and first.split(".")[-1] in {"search", "translator", "engine", "default"}:
            found.append(ast.unparse(node))
    return found


def test_no_module_asks_for_a_search_or_an_engine_by_its_class_or_probes_it():
    found = {str(p.relative_to(SRC)): probes(ast.parse(p.read_text(encoding="utf-8"))) for p in SRC.rglob("*.py")}
    assert {path: calls for path, calls in found.items() if calls} == {}
