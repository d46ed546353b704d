"""Bad input: one clear line naming the file / line / key, exit status 1, no traceback, nothing
written half-way."""


from tests.helpers import assert_clean_failure, assert_nothing_half_written, files_run, good_corpus, run_py, write


def test_missing_file(tmp_path):
    assert_clean_failure(files_run(tmp_path), f"{tmp_path}/corpus/train.en: no such file")
    assert_nothing_half_written(tmp_path)


def test_different_line_counts(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "train.de", b"eine kleine Katze\n")
    assert_clean_failure(files_run(tmp_path), "train.en has 2 lines but")
    assert_nothing_half_written(tmp_path)


def test_invalid_utf8(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "train.de", b"eine kleine Katze\nder \xc3\x28Hund\n")
    assert_clean_failure(files_run(tmp_path), f"{tmp_path}/corpus/train.de:2: invalid UTF-8")
    assert_nothing_half_written(tmp_path)


def test_empty_training_set_after_filtering(tmp_path):
    good_corpus(tmp_path / "corpus")
    assert_clean_failure(files_run(tmp_path, "data.max_len=2"), "no training pairs left after filtering")
    assert_nothing_half_written(tmp_path)


def test_an_over_long_test_sentence_is_named_before_training(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "test.en", b"a small cat\n" + b"word " * 600 + b"\n")
    write(tmp_path / "corpus", "test.de", b"eine kleine Katze\nWort\n")
    result = files_run(tmp_path, "data.eval_max_tokens=256")
    assert_clean_failure(result, f"{tmp_path}/corpus/test.en:2: ")
    assert "tokens, more than the batch budget data.eval_max_tokens=256 (test sentences are never filtered)" \
        in result.stderr
    assert_nothing_half_written(tmp_path)


def test_hub_name_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_py("data=wmt14", f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "data.corpus.path=wmt14: the Hugging Face hub cannot be reached")
    assert "data=files" in result.stderr
    assert_nothing_half_written(tmp_path)


def test_tokenizer_file_that_does_not_match_the_checkpoint(tmp_path, small_checkpoint):
    from transformer_mt.data.tokenizer import TokenizerOptions
    from transformer_mt.data.toy import ToyCorpus
    from transformer_mt.data.vocabulary_training import build_vocabularies

    train = ToyCorpus(num_train=300).load("train")
    build_vocabularies(train.src, train.tgt, TokenizerOptions(vocab_size=120)).src.save(tmp_path / "other.json")
    result = run_py("task=evaluate", f"ckpt_path={small_checkpoint}", f"data.tokenizer.file={tmp_path}/other.json",
                    f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, f"data.tokenizer.file={tmp_path}/other.json: its vocabulary (")
    assert "is not the checkpoint's" in result.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()
