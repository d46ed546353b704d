"""The README (a landing page) and the guides (docs/, built by mkdocs-material from mkdocs.yml): the
site builds with `mkdocs build --strict` (no broken link or heading anchor, no page left out of the
navigation), the README stays short and its links into docs/ lead somewhere, and every
`python run.py ...` command written in a code block of the README or of a guide composes with
Hydra against today's config, in-process: a renamed or missing key fails here, not in a reader's
shell."""

import ast
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.helpers import ROOT, compose_config

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))

# shell words that end the command `python run.py ...` (a pipe, a redirection, the next command)
SHELL_ENDS = {"|", "||", "&&", ";", "&", ")"}
# Hydra's flags that take a value, and those that take none; --help and --hydra-help only print
FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--info", "-i"}
FLAGS = {"-m", "--multirun", "--resolve", "--run", "-r"}
HELP = {"--help", "-h", "--hydra-help"}


def code_lines(path: Path):
    """(line number, text) of every line inside the fenced code blocks of a Markdown file, lines
    ending with a backslash joined to the next (reported at the first)."""
    fenced, start, pending = False, 0, ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced, pending = not fenced, ""
            continue
        if not fenced:
            continue
        if not pending:
            start = number
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        yield start, text


def run_py_args(text: str) -> list[list[str]]:
    """The arguments of each `python run.py` command on a shell line (comments dropped; a pipe or
    a redirection ends a command; `VAR=x python run.py` and `.venv/bin/python run.py` count)."""
    words = shlex.split(text, comments=True)
    commands = []
    for i, word in enumerate(words):
        if word == "run.py" and i > 0 and Path(words[i - 1]).name.startswith("python"):
            args = []
            for arg in words[i + 1:]:
                if arg in SHELL_ENDS or arg.startswith(("<", ">", "2>", "&>")):
                    break
                args.append(arg)
            commands.append(args)
    return commands


def first_of_sweep(override) -> str:
    """`key=a,b,c`, `key=range(1,4)`, `key=choice(a,b)`: the first value; `interval(x,y)`: x."""
    try:
        value = next(iter(override.sweep_string_iterator()))
    except Exception:  # an interval sweep (Optuna's), which cannot be enumerated
        value = str(override.value().start)
    return f"{override.get_key_element()}={value}"


def placeholder(match: re.Match) -> str:
    """`<run>`, `<date>`: a word a reader replaces (Hydra's grammar has no `<`)."""
    return re.sub(r"\W+", "_", match.group(1)).strip("_").upper() or "X"


def overrides_of(args: list[str]) -> list[str] | None:
    """The overrides that `python run.py ARGS` composes (None for `--help` and `--hydra-help`, which
    compose nothing): Hydra's flags dropped, placeholders made words, `a|b` alternatives and `-m`
    sweeps reduced to their first value."""
    if HELP & set(args):
        return None
    words, skip, optional = [], False, False
    for arg in args:
        if skip:
            skip = False
        elif optional or arg.startswith("[") and "=" not in arg.split("[", 1)[0]:  # `[key=value ...]`: optional
            optional = not arg.endswith("]")
        elif arg in FLAGS_WITH_VALUE:
            skip = True
        elif arg in FLAGS or arg == "...":
            pass
        elif arg.startswith("-"):
            raise ValueError(f"{arg}: a flag this test does not know (add it to FLAGS)")
        else:
            arg = re.sub(r"<\([^)]*\)", "/dev/fd/63", arg)  # process substitution: a path
            words.append(re.sub(r"<([^<>]*)>", placeholder, arg.split("|", 1)[0]))
    parsed = OverridesParser.create().parse_overrides(words)
    return [first_of_sweep(o) if o.is_sweep_override() else o.input_line for o in parsed]


def documented_commands() -> list:
    """One pytest param per `python run.py` command in a code block, with its place as the id."""
    params = []
    for path in [README, *PAGES]:
        place = path.relative_to(ROOT)
        for number, text in code_lines(path):
            if "run.py" not in text:
                continue
            for args in run_py_args(text):
                params.append(pytest.param(args, id=f"{place}:{number}"))
    return params


COMMANDS = documented_commands()
_composed: dict[tuple[str, ...], BaseException | None] = {}


def compose_once(tmp_path: Path, overrides: list[str]) -> None:
    """compose_config(tmp_path, overrides), once per distinct list (the README repeats the guides)."""
    key = tuple(overrides)
    if key not in _composed:
        try:
            try:
                from transformer_mt.renamed import refuse_old_keys
            except ImportError:
                refuse_old_keys = None
            if refuse_old_keys is not None:
                refuse_old_keys(overrides)
            compose_config(tmp_path, overrides)
            _composed[key] = None
        except Exception as error:  # noqa: BLE001 - kept and raised again for each command that repeats it
            _composed[key] = error
    if _composed[key] is not None:
        raise _composed[key]


@pytest.mark.filterwarnings("ignore:.*validated against ConfigStore schema")  # submitit's launcher configs
@pytest.mark.parametrize("args", COMMANDS)
def test_every_documented_command_composes(args, tmp_path):
    overrides = overrides_of(args)
    if overrides is None:
        pytest.skip("--help / --hydra-help: prints, composes nothing")
    try:
        compose_once(tmp_path, overrides)
        failure = None
    except Exception as error:  # noqa: BLE001 - any failure to compose is the finding
        failure = f"python run.py {' '.join(args)}\n{type(error).__name__}: {error}"
    if failure:
        pytest.fail(failure, pytrace=False)


def test_commands_are_found_and_read_as_the_shell_and_hydra_would():
    assert len(COMMANDS) >= 40, len(COMMANDS)
    readme = [p for p in COMMANDS if p.id.startswith("README.md:")]
    assert len(readme) >= 13, len(readme)  # the tour: one command per job
    line = ("paste a b | HF_HUB_OFFLINE=1 .venv/bin/python run.py task=score ckpt_path=PATH "
            "task.metric=bleu|chrf < in.tsv > out.txt   # a comment's 'quote")
    assert run_py_args(line) == [["task=score", "ckpt_path=PATH", "task.metric=bleu|chrf"]]
    assert overrides_of(["-m", "model.heads=1,4,8", "seed=range(1,4)", "ckpt_path=outputs/<a run>/last.ckpt",
                         "task.input=<(cat x)", "--cfg", "job", "ckpt_path=[a.ckpt,b.ckpt]", "[data.split=val]",
                         "hydra/launcher=submitit_local", "task.metric=bleu|chrf|ter"]) == [
        "model.heads=1", "seed=1", "ckpt_path=outputs/A_RUN/last.ckpt", "task.input=/dev/fd/63",
        "ckpt_path=[a.ckpt,b.ckpt]", "hydra/launcher=submitit_local", "task.metric=bleu"]
    assert overrides_of(["--help"]) is None
    with pytest.raises(ValueError, match="--config-name"):
        overrides_of(["--config-name", "other"])
    joined = [text for _, text in code_lines(DOCS / "research.md") if "submitit_slurm" in text]
    assert joined and "hydra.launcher.partition=gpu" in joined[0]  # a line ending with \ continues


def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # no banner about mkdocs 2
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()


def nav_pages(nav) -> set[str]:
    """The pages that mkdocs.yml's nav names, at any depth."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(nav_pages(v) for v in nav.values()))
    return set().union(*(nav_pages(v) for v in nav)) if nav else set()


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*]{1,2}", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(path: Path) -> set[str]:
    fenced, found = False, set()
    for line in path.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.add(slug(heading.group(1)))
    return found


def test_readme_is_a_landing_page_whose_links_lead_to_the_guides():
    lines = README.read_text().splitlines()
    assert len(lines) < 250, len(lines)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = {str(page.relative_to(DOCS)) for page in PAGES}
    assert pages and pages == nav_pages(config["nav"]), sorted(pages ^ nav_pages(config["nav"]))
    links = re.findall(r"\]\((docs/[^)#\s]*)(?:#([^)\s]*))?\)", README.read_text())
    assert {"docs/index.md", "docs/configuration.md", "docs/faults.md"} <= {target for target, _ in links}
    for target, anchor in links:
        assert (ROOT / target).is_file(), target
        assert not anchor or anchor in anchors(ROOT / target), f"{target}#{anchor}"
    section = README.read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert "task." in section and "trainer.accelerator" in section and "exit status 1" in section  # the rule
    assert "| `input=` | `task.input=` |" in (DOCS / "configuration.md").read_text()  # the table


def test_the_data_guide_lists_every_data_preset():
    """docs/data.md's table of presets names every conf/data/*.yaml (`data=NAME`)."""
    text = (DOCS / "data.md").read_text()
    missing = [p.stem for p in sorted((ROOT / "conf" / "data").glob("*.yaml")) if f"`data={p.stem}`" not in text]
    assert not missing, missing


def test_the_bounds_list_names_real_tests_and_every_measured_one():
    """docs/layout.md's "Bounds that hold on any CPU" names only tests that exist, and every test
    that records the value it bounds (it takes pytest's `record_property`: a spread measured across
    numeric profiles)."""
    section = (DOCS / "layout.md").read_text().split("\n## Bounds that hold on any CPU\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", section))
    tests = {(str(path.relative_to(ROOT)), node.name): [arg.arg for arg in node.args.args]
             for path in sorted((ROOT / "tests").rglob("test_*.py")) for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    assert len(named) > 50 and not named - tests.keys(), sorted(named - tests.keys())
    measured = {test for test, args in tests.items() if "record_property" in args}
    assert len(measured) > 15 and not measured - named, sorted(measured - named)
