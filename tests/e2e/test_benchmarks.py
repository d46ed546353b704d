"""How profiling.py (train_speed.py --profile-steps) sorts ops and kernels into categories (its
command line sorts made-up events), and what experiments/multi30k/tables.py paired (a run's first test
set or a named one) and tables.py directions print, each run as a process. (loss_speed.py and
attention_speed.py at their CPU smoke sizes run in tests/e2e/test_gpu_script.py, as steps of the GPU
script: every system has numbers, the fused loss matches the plain one, packed attention matches
padded attention.)"""

import json
import os
import re
import subprocess
from pathlib import Path

from tests.helpers import ROOT, python
from transformer_mt.evaluation.significance import paired_test

STEP = ["Optimizer.step#Adam.step"]  # at 32-true Lightning runs the forward and backward inside it
FORWARD = ["forward", *STEP]
BACKWARD = ["autograd::engine::evaluate_function: MmBackward0"]
# (the op and its parents, innermost first; the kernel it launched): the category it belongs to
EVENTS = [
    ((["aten::mm", "aten::linear", *FORWARD], ""), "matmul"),
    ((["aten::add", *FORWARD], ""), "elementwise"),
    ((["aten::mm", "loss", *FORWARD], ""), "loss"),  # the output layer's product is the loss's
    ((["aten::_efficient_attention_forward", "aten::_scaled_dot_product_efficient_attention", *FORWARD], ""),
     "attention"),
    ((["torch_attn::_varlen_attn", *FORWARD], ""), "attention"),
    ((["aten::_fused_adam_", *STEP], ""), "optimizer"),
    ((["aten::mm", "MmBackward0", *BACKWARD], ""), "matmul"),
    ((["aten::mul", "_OutputLayerLossBackward", *BACKWARD], ""), "loss"),
    ((BACKWARD, ""), "other"),  # the engine's own time
    ((["aten::copy_", *FORWARD], "Memcpy HtoD (Pinned -> Device)"), "other"),
    ((["triton_poi_fused_add_native_layer_norm_0", *FORWARD], "triton_poi_fused_add_native_layer_norm_0"),
     "elementwise"),
    ((["triton_tem_fused_mm_1", *FORWARD], "triton_tem_fused_mm_1"), "matmul"),
    ((["aten::_fused_adam_", *STEP], "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>"),
     "optimizer"),
    ((["aten::mm", *FORWARD], "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"), "matmul"),
]


def script(path: str, *args) -> subprocess.CompletedProcess:
    """`python PATH ARGS` in the project's folder (forked from this worker's warm server where it can be)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([python(env), path, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_profile_categories_follow_the_innermost_range_then_the_op(tmp_path):
    given = {"events": [event for event, _ in EVENTS], "intervals": [[0, 2], [1, 3], [5, 6], [5.5, 5.7]]}
    (tmp_path / "events.json").write_text(json.dumps(given))
    result = script("experiments/benchmarks/profiling.py", tmp_path / "events.json")
    assert result.returncode == 0, result.stderr[-2000:]
    sorted_ = json.loads(result.stdout)
    assert sorted_["categories"] == [category for _, category in EVENTS]
    assert sorted_["busy_us"] == 4
    assert sorted_["order"] == ["matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle"]


def test_the_multi30k_paired_script_prints_sacrebleus_paired_tests(tmp_path):
    """experiments/multi30k/tables.py paired (the ensemble against the single model): its table is
    paired_test's figures; runs scored on other references are refused."""
    refs = [f"a dog number {i} runs in the green park ." for i in range(30)]
    hyps = {"base": [r.replace("green ", "") if i % 3 else r for i, r in enumerate(refs)], "system": refs[:-1] + ["x"]}
    for name, lines in hyps.items():
        (tmp_path / name).mkdir()
        for kind, text in (("translations", lines), ("references", refs)):
            (tmp_path / name / f"test.{kind}.txt").write_text("".join(t + "\n" for t in text))
        (tmp_path / name / "metrics.json").write_text(json.dumps(
            {kind: str(tmp_path / name / f"test.{kind}.txt") for kind in ("translations", "references")}))
    args = ["paired", tmp_path / "base", tmp_path / "system", "--metric", "bleu"]
    result = script("experiments/multi30k/tables.py", *args)
    r = paired_test(hyps["base"], hyps["system"], refs)
    row = result.stdout.splitlines()[-1]
    assert row == (f"| bleu | {r.baseline:.2f} | {r.system:.2f} | {r.delta:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] "
                   f"| {r.p_bootstrap:.4f} | {r.p_randomization:.4f} | {'yes' if r.significant else 'no'} |")
    (tmp_path / "system" / "test.references.txt").write_text("other\n" * 30)
    result = script("experiments/multi30k/tables.py", *args)
    assert result.returncode == 1 and "scored on different references" in result.stderr


def write_run(folder: Path, first: list[str], references: list[str], **sets: tuple[list[str], list[str]]) -> None:
    """A run folder as training writes one: its first test set's translations and references, and
    each named set's (`sets`: NAME=(translations, references)), listed in metrics.json."""
    def written(stem: str, translations: list[str], refs: list[str]) -> dict[str, str]:
        for kind, lines in (("translations", translations), ("references", refs)):
            (folder / f"{stem}.{kind}.txt").write_text("".join(line + "\n" for line in lines))
        return {kind: str(folder / f"{stem}.{kind}.txt") for kind in ("translations", "references")}

    folder.mkdir()
    named = {name: written(f"test.{name}", *pair) for name, pair in sets.items()}
    (folder / "metrics.json").write_text(json.dumps({**written("test", first, references), "sets": named}))


def test_the_paired_script_compares_a_named_set_of_a_run_of_several_corpora(tmp_path):
    """--system-set NAME: the system's set NAME (its metrics.json's `sets`), here against a one-set run."""
    refs = [f"a cat number {i} sleeps on the red mat ." for i in range(30)]
    base, system = [r.replace("red ", "") for r in refs], refs[:-2] + ["x", "y"]
    write_run(tmp_path / "base", base, refs)
    write_run(tmp_path / "both", ["?"] * 30, ["!"] * 30, de_en=(system, refs))
    args = ["paired", tmp_path / "base", tmp_path / "both", "--metric", "bleu", "--system-set"]
    result = script("experiments/multi30k/tables.py", *args, "de_en")
    r = paired_test(base, system, refs)
    assert result.stdout.splitlines()[-1].startswith(f"| bleu | {r.baseline:.2f} | {r.system:.2f} |")
    result = script("experiments/multi30k/tables.py", *args, "fr_en")
    assert result.returncode == 1 and "both/metrics.json has no test set 'fr_en' (sets: de_en)" in result.stderr


def test_the_both_directions_report_scores_each_direction_and_its_off_target_share(tmp_path):
    """experiments/multi30k/tables.py directions: per direction the one-direction recipe, the
    both-directions model and the references; without an en_de run, the shipped translations (1,000
    lines: refused here, where test2016 is 4 lines)."""
    german = ["Ein Mann fährt mit dem Fahrrad über die Brücke.", "Zwei Hunde spielen im Schnee.",
              "Eine Frau liest ein Buch im Park.", "Die Kinder essen Eis am Strand."]
    english = ["A man rides his bike across the bridge.", "Two dogs are playing in the snow.",
               "A woman is reading a book in the park.", "The children eat ice cream on the beach."]
    write_run(tmp_path / "both", german, german, de_en=(english[:2] + german[2:], english))
    write_run(tmp_path / "en_de", german[:3] + english[3:], german)
    write_run(tmp_path / "de_en", english, english)
    result = script("experiments/multi30k/tables.py", "directions", tmp_path)
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in result.stdout.splitlines()[2:]]
    assert [(r[0], r[-1]) for r in rows] == [
        ("en->de, the en->de recipe", "25.0%"), ("en->de, the both-directions model", "0.0%"),
        ("en->de, the references", "0.0%"), ("de->en, the de->en recipe", "0.0%"),
        ("de->en, the both-directions model", "50.0%"), ("de->en, the references", "0.0%")]
    assert rows[1][1:4] == rows[3][1:4] == ["100.00", "100.00", "100.00"]
    assert float(rows[4][1]) < 100.0 and rows[2][1:4] == ["", "", ""]
    (tmp_path / "en_de" / "metrics.json").unlink()
    result = script("experiments/multi30k/tables.py", "directions", tmp_path)
    assert result.returncode == 1 and "shipped): 1000 translations for 4 references" in result.stderr
    (tmp_path / "de_en" / "metrics.json").unlink()
    result = script("experiments/multi30k/tables.py", "directions", tmp_path)
    assert result.returncode == 1
    expected = f"error: {re.escape(str(tmp_path))}/de_en: no finished run \\(.*metrics.json is missing\\)"
    assert re.fullmatch(expected, result.stderr.strip())
