"""How profiling.py (loop_speed.py --profile-steps) sorts ops and kernels into categories, and what
experiments/multi30k/tables.py paired (a run's first test set or a named one) and tables.py directions
print. (loss_speed.py and attention_speed.py at their CPU smoke sizes run in
tests/e2e/test_gpu_script.py, as steps of the GPU script: every system has numbers, the fused loss
matches the plain one, packed attention matches padded attention.)"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import load_script
from transformer_mt.evaluation.significance import paired_test


def event(name: str, parent=None) -> SimpleNamespace:
    return SimpleNamespace(name=name, cpu_parent=parent)


def test_profile_categories_follow_the_innermost_range_then_the_op():
    profiling = load_script("experiments/benchmarks/profiling.py")
    category = profiling.category
    step = event("Optimizer.step#Adam.step")  # at 32-true Lightning runs the forward and backward inside it
    forward = event("forward", step)
    assert category(event("aten::mm", event("aten::linear", forward))) == "matmul"
    assert category(event("aten::add", forward)) == "elementwise"
    assert category(event("aten::mm", event("loss", forward))) == "loss"  # the output layer's product is the loss's
    sdpa = event("aten::_scaled_dot_product_efficient_attention", forward)
    assert category(event("aten::_efficient_attention_forward", sdpa)) == "attention"
    assert category(event("torch_attn::_varlen_attn", forward)) == "attention"
    assert category(event("aten::_fused_adam_", step)) == "optimizer"
    backward = event("autograd::engine::evaluate_function: MmBackward0")
    assert category(event("aten::mm", event("MmBackward0", backward))) == "matmul"
    assert category(event("aten::mul", event("_OutputLayerLossBackward", backward))) == "loss"
    assert category(backward) == "other"  # the engine's own time
    assert category(event("aten::copy_", forward), "Memcpy HtoD (Pinned -> Device)") == "other"
    kernel_op = event("triton_poi_fused_add_native_layer_norm_0", forward)
    assert category(kernel_op, "triton_poi_fused_add_native_layer_norm_0") == "elementwise"
    assert category(event("triton_tem_fused_mm_1", forward), "triton_tem_fused_mm_1") == "matmul"
    assert category(event("aten::_fused_adam_", step), "void at::native::(anonymous namespace)::multi_tensor_apply_"
                    "kernel<...>") == "optimizer"
    assert category(event("aten::mm", forward), "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT") == "matmul"
    assert profiling.busy_us([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4
    assert list(profiling.CATEGORIES) == ["matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle"]


def test_the_multi30k_paired_script_prints_sacrebleus_paired_tests(tmp_path, monkeypatch, capsys):
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
    paired = load_script("experiments/multi30k/tables.py")
    argv = ["tables.py", "paired", str(tmp_path / "base"), str(tmp_path / "system"), "--metric", "bleu"]
    monkeypatch.setattr("sys.argv", argv)
    paired.main()
    r = paired_test(hyps["base"], hyps["system"], refs)
    row = capsys.readouterr().out.splitlines()[-1]
    assert row == (f"| bleu | {r.baseline:.2f} | {r.system:.2f} | {r.delta:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] "
                   f"| {r.p_bootstrap:.4f} | {r.p_randomization:.4f} | {'yes' if r.significant else 'no'} |")
    (tmp_path / "system" / "test.references.txt").write_text("other\n" * 30)
    with pytest.raises(SystemExit, match="scored on different references"):
        paired.main()


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


def test_the_paired_script_compares_a_named_set_of_a_run_of_several_corpora(tmp_path, monkeypatch, capsys):
    """--system-set NAME: the system's set NAME (its metrics.json's `sets`), here against a one-set run."""
    refs = [f"a cat number {i} sleeps on the red mat ." for i in range(30)]
    base, system = [r.replace("red ", "") for r in refs], refs[:-2] + ["x", "y"]
    write_run(tmp_path / "base", base, refs)
    write_run(tmp_path / "both", ["?"] * 30, ["!"] * 30, de_en=(system, refs))
    paired = load_script("experiments/multi30k/tables.py")
    argv = ["tables.py", "paired", str(tmp_path / "base"), str(tmp_path / "both"), "--metric", "bleu",
            "--system-set", "de_en"]
    monkeypatch.setattr("sys.argv", argv)
    paired.main()
    r = paired_test(base, system, refs)
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"| bleu | {r.baseline:.2f} | {r.system:.2f} |")
    monkeypatch.setattr("sys.argv", [*argv[:-1], "fr_en"])
    with pytest.raises(SystemExit, match=r"both/metrics.json has no test set 'fr_en' \(sets: de_en\)"):
        paired.main()


def test_the_both_directions_report_scores_each_direction_and_its_off_target_share(tmp_path, monkeypatch, capsys):
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
    report = load_script("experiments/multi30k/tables.py")
    monkeypatch.setattr("sys.argv", ["tables.py", "directions", str(tmp_path)])
    report.main()
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0], r[-1]) for r in rows] == [
        ("en->de, the en->de recipe", "25.0%"), ("en->de, the both-directions model", "0.0%"),
        ("en->de, the references", "0.0%"), ("de->en, the de->en recipe", "0.0%"),
        ("de->en, the both-directions model", "50.0%"), ("de->en, the references", "0.0%")]
    assert rows[1][1:4] == rows[3][1:4] == ["100.00", "100.00", "100.00"]
    assert float(rows[4][1]) < 100.0 and rows[2][1:4] == ["", "", ""]
    (tmp_path / "en_de" / "metrics.json").unlink()
    with pytest.raises(SystemExit, match=r"shipped\): 1000 translations for 4 references"):
        report.main()
    (tmp_path / "de_en" / "metrics.json").unlink()
    with pytest.raises(SystemExit, match=f"^error: {tmp_path}/de_en: no finished run \\(.*metrics.json is missing\\)$"):
        report.main()
