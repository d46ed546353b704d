"""transformer_mt.validate: its predicates, and that config value checks in src go through `check`
(one message shape, `KEY=VALUE: must be WHAT`)."""

import ast
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT
from transformer_mt.errors import ConfigError
from transformer_mt.validate import BOOLEAN, PROBABILITY, check, integer, listing, number, one_of

PACKAGE = ROOT / "src" / "transformer_mt"
# the old shapes of a hand-written value check: "X must be ..." and "X ..., got Y"
HAND_WRITTEN = re.compile(r"must be|, got ")
# hand-written ConfigErrors that may say "must be": (file, a fragment of the message) -> why not `check`
ALLOWED = {
    ("schema/search_keys.py", "must be between 1 and beam_size"):
        "a relation between two keys (decoding.nbest against decoding.beam_size), not one value's check",
    ("schema/between_groups.py", "which must be on and keep at least that many"):
        "a relation between task.last_n and callbacks.epoch_checkpoint.save_top_k, explained in words",
}


def test_integer_and_number():
    assert integer(1)(1) and not integer(1)(0) and not integer(0)(True) and not integer(0)(1.0)
    assert integer(0, 3)(3) and not integer(0, 3)(4)
    assert number(0.0, low_open=True)(0.5) and not number(0.0, low_open=True)(0) and not number(0.0)(float("nan"))
    assert PROBABILITY[0](0.0) and not PROBABILITY[0](1.0)


def test_one_of_compares_types_too():
    assert one_of("a", "b")("b") and not one_of("a", "b")("c") and not one_of("a")(["a"])
    assert not one_of(False, True)(1) and not one_of(1)(True) and not one_of(True)("true")
    assert BOOLEAN[0](False) and not BOOLEAN[0](None)


def test_listing():
    assert listing(["a"]) == "a"
    assert listing(("a", "b")) == "a or b"
    assert listing([False, True, "compound"]) == "false, true or compound"


def test_check_names_the_key_and_value():
    check("model.heads", 8, integer(1), "an integer >= 1")
    check("model.d_k", None, integer(1), "an integer >= 1 or null", nullable=True)
    with pytest.raises(ConfigError, match=r"^model\.d_k=None: must be an integer >= 1$"):
        check("model.d_k", None, integer(1), "an integer >= 1")
    with pytest.raises(ConfigError, match=r"^data\.split='dev': must be train, val or test$"):
        check("data.split", "dev", one_of("train", "val", "test"), listing(("train", "val", "test")))


def strings(node: ast.AST) -> str:
    """The string parts of an expression, joined."""
    return "".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def config_error_texts(path: Path) -> list[tuple[int, str]]:
    """(line, the string parts of the message) of every `raise ConfigError(...)` in `path`, and of every
    refusal a rule returns (a `return` in a function annotated `-> Refusal`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "ConfigError":
            found.extend((node.lineno, strings(arg)) for arg in node.exc.args)
        if isinstance(node, ast.FunctionDef) and isinstance(node.returns, ast.Name) and node.returns.id == "Refusal":
            found.extend((n.lineno, strings(n.value)) for n in ast.walk(node) if isinstance(n, ast.Return) and n.value)
    return found


def test_config_value_checks_go_through_validate_check():
    """A hand-written `raise ConfigError(f"...must be...")` (or `..., got ...`) outside validate.py is a
    value check that `validate.check` should make; only the ALLOWED relations between keys stay."""
    wrong, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == "validate.py":
            continue
        for line, text in config_error_texts(path):
            if not HAND_WRITTEN.search(text):
                continue
            allowed = [key for key in ALLOWED if key[0] == name and key[1] in text]
            used.update(allowed)
            if not allowed:
                wrong.append(f"{name}:{line}: {text!r}")
    assert not wrong, "use transformer_mt.validate.check for these value checks:\n" + "\n".join(wrong)
    assert used == set(ALLOWED), f"stale ALLOWED entries: {set(ALLOWED) - used}"


def test_rules_answer_and_few_places_raise():
    """Rules are functions that answer their refusal (`-> Refusal`; validate.refuse raises it where the
    answer stops a run): `raise ConfigError` stays in at most 55 places of src (issue 82)."""
    raised = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
              and getattr(node.exc.func, "id", None) == "ConfigError"]
    assert len(raised) <= 55, f"{len(raised)} `raise ConfigError` in src: write rules as functions answering a " \
                              f"Refusal ({', '.join(raised)})"
