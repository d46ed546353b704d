"""task=report over seeds: rows grouped across seeds, mean and spread, sacreBLEU's paired tests
against the base row seed by seed (on BLEU, chrF or TER), the rule that marks a row as differing,
and refusals."""

import csv
import json
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from tests.helpers import compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.evaluation.metrics import tokenized_lowercased_bleu
from transformer_mt.evaluation.significance import difference_interval, paired_test
from transformer_mt.tasks import run
from transformer_mt.tasks.report import identical_note

REFS = ToyCorpus(num_train=0, num_val=0, num_test=150, seed=7).load("test").tgt


def drop_a_word(line: str, rng: random.Random) -> str:
    words = line.split()
    del words[rng.randrange(len(words))]
    return " ".join(words)


def base_hyps(seed: int) -> list[str]:
    """Half the lines lose a word (which half depends on the seed)."""
    rng = random.Random(seed)
    return [drop_a_word(r, rng) if rng.random() < 0.5 else r for r in REFS]


def better_hyps(seed: int) -> list[str]:
    """One line in twenty loses a word: clearly better than the base."""
    rng = random.Random(100 + seed)
    return [drop_a_word(r, rng) if rng.random() < 0.05 else r for r in REFS]


def same_hyps(seed: int) -> list[str]:
    """The base's lines with 6 of its damaged lines repaired and 6 intact ones damaged: no real change."""
    hyps, rng = base_hyps(seed), random.Random(200 + seed)
    damaged = [i for i, (h, r) in enumerate(zip(hyps, REFS)) if h != r]
    intact = [i for i, (h, r) in enumerate(zip(hyps, REFS)) if h == r]
    for i in damaged[:6]:
        hyps[i] = REFS[i]
    for i in intact[:6]:
        hyps[i] = drop_a_word(REFS[i], rng)
    return hyps


def write_job(sweep: Path, number: int, heads: int, seed: int, hyps: list[str] | None, refs: list[str] = REFS,
              failed: str | None = None) -> None:
    """A job folder; a finished one (`hyps`) has metrics.json with test BLEU, chrF and TER."""
    folder = sweep / str(number)
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create([f"model.heads={heads}", f"seed={seed}"]), folder / ".hydra" / "overrides.yaml")
    if failed:
        (folder / "error.txt").write_text(failed + "\n")
    if hyps is None:
        return
    (folder / "test.translations.txt").write_text("".join(h + "\n" for h in hyps))
    (folder / "test.references.txt").write_text("".join(r + "\n" for r in refs))
    bleu = BLEU().corpus_score(hyps, [refs]).score
    metrics = {"test/bleu": bleu, "test/chrf": CHRF().corpus_score(hyps, [refs]).score,
               "test/ter": TER().corpus_score(hyps, [refs]).score, "val/bleu_best": bleu - 1.0,
               "val/ppl": 10.0 + seed, "train_seconds": 60.0 * seed,
               "num_parameters": 1_000_000, "steps": 100, "translations": str(folder / "test.translations.txt"),
               "references": str(folder / "test.references.txt")}
    (folder / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def sweep(tmp_path) -> Path:
    """heads 8 (the base), 4 (better), 16 (the same), 32 (one seed failed, one killed), seeds 1 and 2."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    OmegaConf.save(OmegaConf.create({"model": {"heads": 8}, "seed": 1234}), sweep / "multirun.yaml")
    number = 0
    for heads, make in ((4, better_hyps), (8, base_hyps), (16, same_hyps)):
        for seed in (1, 2):
            write_job(sweep, number, heads, seed, make(seed))
            number += 1
    write_job(sweep, number, 32, 1, None, failed="TrainingDiverged: train: loss nan at step 3")
    write_job(sweep, number + 1, 32, 2, None)
    return sweep


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


BOOTSTRAP, RANDOMIZATION = 200, 1000  # fewer than sacreBLEU's 1,000 and 10,000: the same tests, 10x sooner
IDENTICAL_NOTE = identical_note(BOOTSTRAP, RANDOMIZATION)


def report(sweep: Path, tmp_path: Path, *overrides: str) -> dict:
    return run(compose_config(tmp_path / "report_run", [
        "task=report", f"task.sweep_dir={sweep}", f"task.bootstrap_samples={BOOTSTRAP}",
        f"task.randomization_trials={RANDOMIZATION}", *overrides]))


def test_the_better_row_alone_is_marked_and_every_job_is_listed(sweep, tmp_path):
    result = report(sweep, tmp_path)
    assert result["rows"] == 4 and result["jobs"] == 8 and result["done"] == 6
    assert result["differs"] == {0: "better *", 2: "-", 3: ""}  # row 1 is the base
    text = (sweep / "report.md").read_text()
    assert "- row 0 (model.heads=4): better than the base" in text
    assert "- row 1 (model.heads=8): the base row" in text
    assert "- row 2 (model.heads=16): not shown to differ from the base" in text
    assert "- row 3 (model.heads=32): no seed finished in both" in text
    jobs = (sweep / "jobs.csv").read_text().splitlines()
    assert len(jobs) == 9  # a header and all eight jobs, the failed and the killed included
    assert "failed: TrainingDiverged: train: loss nan at step 3" in jobs[7] and "running or killed" in jobs[8]

    rows = {row["row"]: row for row in read_csv(sweep / "report.csv")}
    base = rows["1 (base)"]
    tests = [base_hyps(s) for s in (1, 2)]
    scores = [BLEU().corpus_score(h, [REFS]).score for h in tests]
    assert base["seeds"] == "2/2" and rows["3"]["seeds"] == "0/2"
    assert base["test BLEU"] == f"{statistics.mean(scores):.2f} ± {statistics.stdev(scores):.2f}"
    assert base["train (min)"] == "1.50 ± 0.71"  # 1 and 2 minutes
    assert (sweep / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_job_resumed_into_its_folder_stays_in_its_row(sweep, tmp_path):
    """Resuming a killed job (`ckpt_path=` its last.ckpt, into its folder) rewrites its overrides:
    ckpt_path is no setting, so the job is still its row's seed."""
    overrides = sweep / "0" / ".hydra" / "overrides.yaml"
    OmegaConf.save(OmegaConf.create([*OmegaConf.load(overrides), f"ckpt_path={sweep}/0/checkpoints/last.ckpt"]),
                   overrides)
    result = report(sweep, tmp_path)
    assert result["rows"] == 4 and result["differs"] == {0: "better *", 2: "-", 3: ""}


def test_a_sweep_whose_config_leaves_the_key_null_says_so_and_base_row_names_the_base(sweep, tmp_path):
    """ablation/dk's base config has model.d_k null (d_model / heads) while its jobs say 32: no row has
    the sweep's own settings. The report says so instead of testing nothing quietly, and task.base_row=1
    gives the same report as a config that names the base."""
    expected = report(sweep, tmp_path)
    expected_tests = (sweep / "significance.csv").read_text()
    OmegaConf.save(OmegaConf.create({"model": {"heads": None}, "seed": 1234}), sweep / "multirun.yaml")
    result = report(sweep, tmp_path)
    text = (sweep / "report.md").read_text()
    assert result["differs"] == {} and read_csv(sweep / "significance.csv") == []
    assert ("**No base row**: no row has the sweep's own settings (model.heads=None), so there is no base row "
            "and nothing is tested; name it with task.base_row=N (the row column).") in text
    assert "- row 1 (model.heads=8): not tested (no base row)." in text
    named = report(sweep, tmp_path, "task.base_row=1")
    assert named["differs"] == expected["differs"] == {0: "better *", 2: "-", 3: ""}
    assert (sweep / "significance.csv").read_text() == expected_tests
    assert "No base row" not in (sweep / "report.md").read_text()
    with pytest.raises(ConfigError, match=r"^task\.base_row=4: must be a row number of this sweep, 0 to 3$"):
        report(sweep, tmp_path, "task.base_row=4")


def test_a_row_with_the_base_rows_outputs_shows_no_p_values_and_says_why(sweep, tmp_path):
    """Row 4 (model.heads=2) translates exactly as the base for both seeds: sacreBLEU's tests give
    their smallest p (0.0010 / 0.0001) beside a difference of +0.00, which reads as "significant".
    The report shows - for them, a note saying why, and does not mark the row."""
    report(sweep, tmp_path)
    assert IDENTICAL_NOTE not in (sweep / "report.md").read_text()  # only where a pair is identical
    for number, seed in ((8, 1), (9, 2)):
        write_job(sweep, number, 2, seed, base_hyps(seed))
    result = report(sweep, tmp_path)
    assert result["differs"] == {0: "better *", 2: "-", 3: "", 4: "-"}
    rows = read_csv(sweep / "report.csv")
    assert (rows[4]["Δ test BLEU"], rows[4]["max p (bootstrap / AR)"], rows[4]["differs"]) == ("+0.00", "- / -", "-")
    assert rows[0]["max p (bootstrap / AR)"] != "- / -"
    tests = [(row["seed"], row["Δ"], row["p bootstrap"], row["p AR"]) for row in read_csv(sweep / "significance.csv")]
    assert [test for test in tests if test[2] == "-"] == [("1", "+0.00", "-", "-"), ("2", "+0.00", "-", "-")]
    text = (sweep / "report.md").read_text()
    assert IDENTICAL_NOTE in text and "smallest p (1/201, 1/1001)" in text
    assert ("- row 4 (model.heads=2): identical to the base: +0.00 test BLEU, every sentence scored alike for all 2 "
            "seed pairs; nothing to test.") in text
    assert "| 2 | 2/2 |" in text and "| +0.00 | - / - | - |" in text  # row 4 of the table (the better row: p's)


def test_identical_systems_are_never_significant():
    """sacreBLEU's p-values for a system against itself are its floor; `identical` says so. Outputs
    that differ only where the metric does not look (spacing, which BLEU's and chrF's tokenization
    drop) are identical to it too; different outputs with about the same score are not."""
    hyps = base_hyps(1)
    same = paired_test(hyps, list(hyps), REFS, n_bootstrap=100, n_randomization=200)
    assert (same.p_bootstrap, same.p_randomization) == (1 / 101, 1 / 201) and same.delta == 0
    assert same.identical and not same.significant
    spaced = [h.replace(" ", "  ", 1) for h in hyps]
    for metric in ("bleu", "chrf"):
        assert paired_test(hyps, spaced, REFS, n_bootstrap=100, n_randomization=200, metric=metric).identical
    assert not paired_test(hyps, same_hyps(1), REFS, n_bootstrap=100, n_randomization=200).identical


def test_p_values_are_sacrebleus_own(sweep, tmp_path):
    report(sweep, tmp_path)
    rows = read_csv(sweep / "significance.csv")
    assert list(rows[0])[:3] == ["row", "model.heads", "seed"] and len(rows) == 4  # rows 0 and 2, two seeds each
    for row in rows:
        seed = int(row["seed"])
        system = better_hyps(seed) if row["row"] == "0" else same_hyps(seed)
        named = [("base", base_hyps(seed)), ("system", system)]
        bootstrap = PairedTest(named, {"BLEU": BLEU()}, [REFS], test_type="bs", n_samples=BOOTSTRAP)()[1]["BLEU"][1]
        randomization = PairedTest(named, {"BLEU": BLEU()}, [REFS], test_type="ar",
                                   n_samples=RANDOMIZATION)()[1]["BLEU"][1]
        assert row["p bootstrap"] == f"{bootstrap.p_value:.4f}" and row["p AR"] == f"{randomization.p_value:.4f}"
        assert row["BLEU"] == f"{bootstrap.score:.2f}"


@pytest.mark.parametrize("metric, scorer", [("bleu", BLEU), ("chrf", CHRF), ("ter", TER),
                                            ("bleu_tok_lc", lambda: BLEU(lowercase=True))])
def test_the_difference_interval_is_that_of_the_bootstraps_own_resamples(metric, scorer):
    base, system = base_hyps(1), same_hyps(1)
    low, high = difference_interval(base, system, REFS, n_samples=40, metric=metric)
    idxs = np.random.default_rng(12345).choice(len(REFS), size=(40, len(REFS)), replace=True)  # sacreBLEU's draws
    diffs = sorted(scorer().corpus_score([system[i] for i in rows], [[REFS[i] for i in rows]]).score
                   - scorer().corpus_score([base[i] for i in rows], [[REFS[i] for i in rows]]).score for rows in idxs)
    # sacreBLEU sums its statistics in float32: equal to 1e-4 points
    assert low == pytest.approx(diffs[1], abs=1e-4) and high == pytest.approx(diffs[38], abs=1e-4)
    result = paired_test(base, system, REFS, n_bootstrap=40, n_randomization=100, metric=metric)
    assert result.delta == pytest.approx(scorer().corpus_score(system, [REFS]).score
                                         - scorer().corpus_score(base, [REFS]).score)


@pytest.mark.parametrize("metric, label, scorer", [("chrf", "chrF", CHRF), ("ter", "TER", TER)])
def test_p_values_on_chrf_and_ter_are_sacrebleus_own(sweep, tmp_path, metric, label, scorer):
    result = report(sweep, tmp_path, f"task.metric={metric}")
    assert result["metric"] == metric and result["differs"] == {0: "better *", 2: "-", 3: ""}
    rows = read_csv(sweep / "significance.csv")
    assert list(rows[0])[4:6] == [f"base {label}", label] and len(rows) == 4
    for row in rows:
        seed = int(row["seed"])
        system = better_hyps(seed) if row["row"] == "0" else same_hyps(seed)
        named = [("base", base_hyps(seed)), ("system", system)]
        bootstrap = PairedTest(named, {label: scorer()}, [REFS], test_type="bs", n_samples=BOOTSTRAP)()[1]
        randomization = PairedTest(named, {label: scorer()}, [REFS], test_type="ar", n_samples=RANDOMIZATION)()[1]
        (bootstrap,), (randomization,) = ([v[1] for k, v in r.items() if k != "System"]
                                          for r in (bootstrap, randomization))
        assert row["p bootstrap"] == f"{bootstrap.p_value:.4f}" and row["p AR"] == f"{randomization.p_value:.4f}"
        assert row[label] == f"{bootstrap.score:.2f}" == f"{scorer().corpus_score(system, [REFS]).score:.2f}"
    table = {row["row"]: row for row in read_csv(sweep / "report.csv")}
    assert f"Δ test {label}" in table["0"] and "Δ test BLEU" not in table["0"]
    assert f"The tests compare test {label}" in (sweep / "report.md").read_text()


def test_ter_is_better_lower(sweep, tmp_path):
    """The row with fewer dropped words has the lower TER: better, with a negative difference; against
    that row as the base, the base's own setting is worse, with a positive one."""
    result = report(sweep, tmp_path, "task.metric=ter")
    assert result["differs"] == {0: "better *", 2: "-", 3: ""}
    better = read_csv(sweep / "report.csv")[0]
    deltas = [TER().corpus_score(better_hyps(s), [REFS]).score - TER().corpus_score(base_hyps(s), [REFS]).score
              for s in (1, 2)]
    assert max(deltas) < 0 and better["Δ test TER"] == f"{statistics.mean(deltas):+.2f}"
    text = (sweep / "report.md").read_text()
    assert f"- row 0 (model.heads=4): better than the base: {better['Δ test TER']} test TER (lower is better)" in text
    against_better = report(sweep, tmp_path, "task.metric=ter", "task.base_row=0")
    assert against_better["differs"] == {1: "worse *", 2: "worse *", 3: ""}
    assert float(read_csv(sweep / "report.csv")[1]["Δ test TER"]) > 1
    assert "- row 1 (model.heads=8): worse than the base: +" in (sweep / "report.md").read_text()


def test_an_unknown_metric_is_refused_in_one_line(sweep, tmp_path):
    with pytest.raises(ConfigError, match=r"^task\.metric='meteor': must be bleu, chrf, ter or bleu_tok_lc$"):
        report(sweep, tmp_path, "task.metric=meteor")
    # names are lowercase
    with pytest.raises(ConfigError, match=r"^task\.metric='BLEU': must be bleu, chrf, ter or bleu_tok_lc$"):
        report(sweep, tmp_path, "task.metric=BLEU")


def test_jobs_from_before_ter_show_a_dash(sweep, tmp_path):
    """The base row's jobs (2, 3) wrote no chrF or TER, job 5 (row 2, seed 2) no TER: a dash where a row
    has none, the count where only some seeds have it, nothing for a row without a finished job."""
    for job, keys in ((2, ("test/chrf", "test/ter")), (3, ("test/chrf", "test/ter")), (5, ("test/ter",))):
        path = sweep / str(job) / "metrics.json"
        metrics = json.loads(path.read_text())
        path.write_text(json.dumps({k: v for k, v in metrics.items() if k not in keys}))
    report(sweep, tmp_path)
    rows = read_csv(sweep / "report.csv")
    assert [(row["test chrF"], row["test TER"]) for row in rows][1:2] == [("-", "-")]
    ters = [TER().corpus_score(better_hyps(s), [REFS]).score for s in (1, 2)]
    assert rows[0]["test TER"] == f"{statistics.mean(ters):.2f} ± {statistics.stdev(ters):.2f}"
    assert rows[2]["test TER"] == f"{TER().corpus_score(same_hyps(1), [REFS]).score:.2f} (1 of 2 seeds)"
    assert rows[2]["test chrF"].count("±") == 1 and rows[3]["test TER"] == ""
    jobs = read_csv(sweep / "jobs.csv")
    assert [job["test TER"] for job in jobs][1:7] == [
        f"{TER().corpus_score(better_hyps(2), [REFS]).score:.2f}", "-", "-",
        f"{TER().corpus_score(same_hyps(1), [REFS]).score:.2f}", "-", ""]
    assert jobs[2]["test BLEU"] != "-" and "| test BLEU | test chrF | test TER |" in (sweep / "report.md").read_text()


def test_missing_translations_and_other_references_are_refused_in_one_line(sweep, tmp_path):
    (sweep / "0" / "test.translations.txt").unlink()
    with pytest.raises(DataError, match=r"job 0: its test translations .* are missing"):
        report(sweep, tmp_path)
    refs = REFS[:-1] + ["another reference"]
    hyps = better_hyps(1)
    (sweep / "0" / "test.translations.txt").write_text("".join(h + "\n" for h in hyps))
    (sweep / "0" / "test.references.txt").write_text("".join(r + "\n" for r in refs))
    # names relative to the job folder, as in a sweep folder moved since: found there
    (sweep / "0" / "metrics.json").write_text(json.dumps({"test/bleu": 1.0, "translations": "test.translations.txt",
                                                          "references": "test.references.txt"}))
    with pytest.raises(DataError, match=r"job 0 was scored on other references than the base row's job 2 "
                                          r"\(seed 1\)"):
        report(sweep, tmp_path)


def test_tokenized_lowercased_bleu_is_tested_on_the_score_the_runs_report():
    """task.metric=bleu_tok_lc: the paired tests score what metrics.json's bleu_tok_lc holds, and do not
    see case (a system that only capitalizes the base differs on cased BLEU, not on this one)."""
    refs = [line.capitalize() for line in REFS]
    base, system = base_hyps(3), same_hyps(3)
    result = paired_test(base, system, refs, n_bootstrap=40, n_randomization=100, metric="bleu_tok_lc")
    assert result.baseline == pytest.approx(tokenized_lowercased_bleu(base, refs)["bleu_tok_lc"], abs=1e-3)
    assert result.system == pytest.approx(tokenized_lowercased_bleu(system, refs)["bleu_tok_lc"], abs=1e-3)
    upper = [line.upper() for line in base]
    assert paired_test(base, upper, refs, n_bootstrap=40, n_randomization=100, metric="bleu_tok_lc").identical
    assert not paired_test(base, upper, refs, n_bootstrap=40, n_randomization=100).identical


@pytest.mark.parametrize(("metric", "keys", "ylabel"), [
    ("bleu", ["val/bleu_best", "test/bleu"], "BLEU (higher is better)"),
    ("chrf", ["val/chrf", "test/chrf"], "chrF (higher is better)"),
    ("ter", ["val/ter", "test/ter"], "TER (lower is better)")])
def test_the_plot_shows_the_metric_asked_for_and_which_way_is_better(sweep, tmp_path, metric, keys, ylabel):
    """report.png draws task.metric's scores (each row's seeds), not BLEU whatever was asked."""
    for job in sweep.iterdir():
        if (job / "metrics.json").is_file():
            metrics = json.loads((job / "metrics.json").read_text())
            metrics.update({"val/chrf": metrics["test/chrf"] - 1.0, "val/ter": metrics["test/ter"] + 1.0})
            (job / "metrics.json").write_text(json.dumps(metrics))
    drawn = report(sweep, tmp_path, f"task.metric={metric}")["plot"]
    assert drawn["ylabel"] == ylabel and list(drawn["series"]) == keys
    test_values = drawn["series"][keys[1]]
    expected = [sorted(json.loads((sweep / str(n) / "metrics.json").read_text())[keys[1]] for n in (2 * r, 2 * r + 1))
                for r in range(3)]
    assert [sorted(values) for values in test_values[:3]] == expected and test_values[3] == []  # row 3: none done
    assert (sweep / "report.png").stat().st_size > 0


def test_a_job_without_a_seed_override_shows_the_seed_its_config_had(tmp_path):
    sweep = tmp_path / "sweep"
    for number, heads in enumerate((8, 4)):
        write_job(sweep, number, heads, 1, base_hyps(1) if heads == 8 else better_hyps(1))
        overrides = sweep / str(number) / ".hydra" / "overrides.yaml"
        OmegaConf.save(OmegaConf.create([f"model.heads={heads}"]), overrides)  # no seed= override
        OmegaConf.save(OmegaConf.create({"seed": 1234, "model": {"heads": heads}}), overrides.with_name("config.yaml"))
    OmegaConf.save(OmegaConf.create({"model": {"heads": 8}, "seed": 1234}), sweep / "multirun.yaml")
    report(sweep, tmp_path)
    assert [line["seed"] for line in read_csv(sweep / "jobs.csv")] == ["1234", "1234"]
    assert [line["seed"] for line in read_csv(sweep / "significance.csv")] == ["1234"]
    assert "None" not in (sweep / "report.md").read_text()


def test_the_tests_run_sacrebleus_counts_unless_asked_and_say_how_many(sweep, tmp_path):
    options = compose_config(tmp_path / "run", ["task=report", f"task.sweep_dir={sweep}"]).task
    assert (options.bootstrap_samples, options.randomization_trials) == (1000, 10000)  # sacreBLEU's defaults
    report(sweep, tmp_path)
    assert "paired bootstrap (200 resamples) and paired approximate randomization (1,000 trials)" in (
        sweep / "report.md").read_text()
    with pytest.raises(ConfigError, match=r"^task\.bootstrap_samples=0: must be an integer >= 1$"):
        report(sweep, tmp_path, "task.bootstrap_samples=0")


def test_the_named_test_sets_of_several_corpora_get_a_column_each_and_old_runs_a_dash(sweep, tmp_path):
    """Jobs trained on several corpora (data.corpora) wrote test/NAME/bleu for each named test set:
    a column per set, after the report's own; a job from before (job 0) shows a dash."""
    for job in range(1, 6):
        path = sweep / str(job) / "metrics.json"
        metrics = json.loads(path.read_text())
        path.write_text(json.dumps({**metrics, "test/news/bleu": 20.0 + job, "test/news/chrf": 50.0}))
    report(sweep, tmp_path)
    rows = read_csv(sweep / "report.csv")
    assert [row["test BLEU (news)"] for row in rows] == ["21.00 (1 of 2 seeds)", "22.50 ± 0.71", "24.50 ± 0.71", ""]
    jobs = read_csv(sweep / "jobs.csv")
    assert [job["test BLEU (news)"] for job in jobs] == ["-", "21.00", "22.00", "23.00", "24.00", "25.00", "", ""]
    assert list(jobs[0])[-1] == "test BLEU (news)"
