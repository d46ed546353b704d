"""The config's schema (transformer_mt.schema): every top-level key and task option declared once,
with a default, a rule and a description; every value checked right after composition, before any
work; docs/configuration.md's "Every key" written from it."""

from dataclasses import fields

import pytest

from tests.helpers import ROOT, compose_config, not_our_checkpoint
from transformer_mt.errors import ConfigError
from transformer_mt.schema.keys import described
from transformer_mt.schema.optim import OPTIMS, AdamNode, InverseSqrtNode, NoamNode
from transformer_mt.schema.search_keys import SEARCHES, SearchOptionsNode
from transformer_mt.schema.shared import Trained
from transformer_mt.schema.top import RunConfig
from transformer_mt.tasks import run
from transformer_mt.tasks.options import TASKS
from transformer_mt.tasks.options.multistage import BacktranslateTask, DistillTask
from transformer_mt.tasks.options.reference import END, START, reference
from transformer_mt.tasks.pipelines.compose import TRAINING_TASK_KEYS


def test_every_key_has_a_description_and_every_task_class_a_usage():
    for kind in (RunConfig, *TASKS.values(), *SEARCHES.values(), *OPTIMS.values(), SearchOptionsNode, AdamNode,
                 NoamNode, InverseSqrtNode):
        keys = [f.name for f in fields(kind) if f.name != "defaults"]
        assert keys == [f.name for f in described(kind)], kind  # every field made by schema.keys.key
        assert all(len(f.metadata["help"]) > 10 for f in described(kind)), kind
    assert all((kind.__doc__ or "").startswith("python run.py") for kind in TASKS.values())


def test_the_docs_list_exactly_the_schema():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index(START):text.index(END) + len(END)]
    assert section == reference()
    for kind in TASKS.values():  # each key a row, named as the command line names it
        assert all(f"| `task.{f.name}` |" in section for f in described(kind))


def test_the_pipelines_take_the_training_keys_of_task_train():
    assert TRAINING_TASK_KEYS == ("tokenized_bleu", "last_n")
    for kind in (TASKS["train"], DistillTask, BacktranslateTask):
        assert issubclass(kind, Trained)
    assert "tag" not in {f.name for f in fields(BacktranslateTask)}  # its tag is the synthetic corpus's


@pytest.mark.parametrize("overrides, message", [
    (["seed=-1"], "seed=-1: must be an integer >= 0"),
    (["quantize=float16"], "quantize='float16': must be none or int8"),
    (["progress=sometimes"], "progress='sometimes': must be true, false or null"),
    (["float32_matmul_precision=low"], "float32_matmul_precision='low': must be highest, high (TF32 on a GPU)"),
    (["tokens_per_update=0"], "tokens_per_update=0: must be an integer >= 1 or null"),
    (["task.last_n=-1"], "task.last_n=-1: must be an integer >= 0 (0: no averaging)"),
    (["task.tokenized_bleu=yes"], "task.tokenized_bleu='yes': must be false, true (13a-tokenized, lowercased)"),
    (["task=translate", "ckpt_path=x.ckpt", "task.max_tokens=0"], "task.max_tokens=0: must be an integer >= 1"),
    (["task=translate", "ckpt_path=x.ckpt", "task.long_lines=drop"],
     "task.long_lines='drop': must be error, skip or truncate"),
    (["task=translate", "ckpt_path=x.ckpt", "task.buffer_size=0"], "task.buffer_size=0: must be an integer >= 1"),
    (["task=score", "ckpt_path=x.ckpt", "task.normalize=maybe"], "task.normalize='maybe': must be true or false"),
    (["task=export", "ckpt_path=x.ckpt", "task.quantization=int4"],
     "task.quantization='int4': must be none, int8, int8_float16, int8_float32, float16 or bfloat16"),
    (["task=export", "ckpt_path=x.ckpt", "task.format=ct2", "quantize=float16"],
     "quantize='float16': must be none or int8"),
    (["task=distill", "task.teacher=x.ckpt", "task.chunk_lines=0"], "task.chunk_lines=0: must be an integer >= 1"),
    (["task=distill", "task.teacher=x.ckpt", "task.originals_weight=-1"],
     "task.originals_weight=-1: must be a number >= 0"),
    (["task=backtranslate", "task.monolingual=m.txt", "task.weight=-0.5"], "task.weight=-0.5: must be a number >= 0"),
    (["task=report", "task.sweep_dir=s", "task.bootstrap_samples=0"],
     "task.bootstrap_samples=0: must be an integer >= 1"),
    (["task=average", "task.run_dir=r", "task.last_n=0"], "task.last_n=0: must be an integer >= 1 or null"),
    # the decoding group, one node per search (schema/search_keys.py), also as validation's decoding
    (["decoding=sample", "decoding.temperature=0"], "decoding.temperature=0: must be a number > 0"),
    (["decoding=sample", "decoding.top_p=1.5"], "decoding.top_p=1.5: must be a number in (0, 1]"),
    (["decoding=sample", "decoding.nbest=0"], "decoding.nbest=0: must be an integer >= 1"),
    (["decoding=beam", "decoding.beam_size=0"], "decoding.beam_size=0: must be an integer >= 1"),
    (["decoding=beam", "decoding.beam_size=2", "decoding.nbest=3"],
     "decoding.nbest=3: must be between 1 and decoding.beam_size=2"),
    (["decoding=beam", "decoding.constraints=yes"], "decoding.constraints='yes': must be true or false"),
    (["decoding.options.static_step=yes"], "decoding.options.static_step='yes': must be true or false"),
    (["decoding.options.check_every=0"], "decoding.options.check_every=0: must be an integer >= 1"),
    (["decoding@val_decoding=beam", "val_decoding.options.max_len_a=-1"],
     "val_decoding.options.max_len_a=-1: must be a number >= 0"),
    # the optim group, one node per option (schema/optim.py)
    (["optim.optimizer.lr=-1"], "optim.optimizer.lr=-1: must be a number > 0"),
    (["optim.optimizer.betas=[0.9]"], "optim.optimizer.betas=[0.9]: must be two numbers in [0, 1)"),
    (["optim=inverse_sqrt", "optim.scheduler.warmup_steps=0"], "optim.scheduler.warmup_steps=0: must be an integer"),
    (["optim.finetune.peak_fraction=0"], "optim.finetune.peak_fraction=0: must be a number > 0"),
    # rules between groups (schema/between_groups.py)
    (["optim=finetune"], "optim.optimizer.lr=null is optim=finetune's, derived from the starting model's peak: it "
                         "needs model.init_from"),
    (["data.packed=true", "model.positional=relative"], "data.packed=true: model.positional=relative attends"),
    (["~callbacks.rng_state"], "callbacks.rng_state: a training run needs it"),
    (["tokens_per_update=2000", "trainer.accumulate_grad_batches=2"],
     "tokens_per_update=2000 sets the gradient accumulation: leave trainer.accumulate_grad_batches at 1 (it is 2)"),
    (["trainer.precision=16-mixed", "trainer.gradient_clip_val=1.0", "optim.optimizer.fused=true"],
     "trainer.gradient_clip_val=1.0 with trainer.precision=16-mixed: a fused optimizer"),
])
def test_a_bad_value_is_one_line_naming_its_key_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as err:
        run(compose_config(tmp_path / "run", overrides, cache_dir=tmp_path / "cache"))
    assert str(err.value).startswith(message)
    assert not (tmp_path / "cache").exists()
    assert not (tmp_path / "run").exists()  # refused before any work: no run folder, no config.yaml


def test_hf_export_refuses_a_weight_type_naming_the_key_that_set_it(tmp_path):
    model = not_our_checkpoint(tmp_path / "x.ckpt")  # a file, so that the path checks let it through
    for given, key in ((["task.quantization=int8"], "task.quantization=int8"), (["quantize=int8"], "quantize=int8")):
        with pytest.raises(ConfigError, match=f"^{key}: task.format=hf exports the model's float weights"):
            run(compose_config(tmp_path / "run", ["task=export", f"ckpt_path={model}", *given]))
