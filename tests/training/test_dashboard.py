"""The pieces behind the dashboards: the FLOPs estimate, cross-attention maps and their plot, and
the wandb run's name and group."""

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from tests.helpers import compose_config, make_model
from transformer_mt import plots
from transformer_mt.model import TransformerConfig
from transformer_mt.model.flops import forward_flops, training_flops
from transformer_mt.tasks.runs.build import wandb_names
from transformer_mt.tasks.runs.init_from import architecture
from transformer_mt.training.dashboard import cross_attention_maps
from transformer_mt.training.step_meter import known_peak_flops


def test_flops_of_model_base_match_a_hand_computation(tmp_path):
    cfg = compose_config(tmp_path, ["model=base"])
    config = TransformerConfig(src_vocab_size=10_000, tgt_vocab_size=10_000, **architecture(cfg.model))
    # d = 512, d_ff = 2048, 8 heads x 64 = 512, 6 + 6 layers, V = 10,000, sentences of 25 + 25 tokens.
    # Encoder layer, per source token: Q, K, V 2*512*1536 = 1,572,864; output 2*512*512 = 524,288;
    # scores and weighted sum 2 * 2*25*512 = 51,200; FFN 2 * 2*512*2048 = 4,194,304 -> 6,342,656.
    # Decoder layer, per source token: K, V of the memory 2*512*1024 = 1,048,576.
    per_src = 6 * 6_342_656 + 6 * 1_048_576
    # Decoder layer, per target token: self-attention 2,097,152 + 51,200; cross-attention Q and output
    # 1,048,576 + 51,200; FFN 4,194,304 -> 7,442,432. Output layer: 2*512*10,000 = 10,240,000.
    per_tgt = 6 * 7_442_432 + 10_240_000
    assert forward_flops(config, 25, 25) == (per_src, per_tgt) == (44_347_392, 54_894_592)
    # training: forward + backward (twice the forward) = 3 forward passes, here 64 pairs of 25 + 25 tokens
    assert training_flops(config, 64 * 25, 64 * 25, 25, 25) == 3 * 64 * 25 * (per_src + per_tgt) == 476_361_523_200


def test_flops_of_relative_positions_count_the_distance_terms(tmp_path):
    cfg = compose_config(tmp_path, ["model=base"])
    shape = architecture(cfg.model)
    flops = {kind: forward_flops(TransformerConfig(src_vocab_size=10_000, tgt_vocab_size=10_000,
                                                   **{**shape, "positional": kind}), 25, 30)
             for kind in ("sinusoidal", "rotary", "relative")}
    # relative: per layer the scores and weighted sums against the distance embeddings once more,
    # 2 * 2 * L * 512 for a self-attention over L = 25 source / 30 target tokens; 6 layers each
    assert flops["relative"][0] - flops["sinusoidal"][0] == 6 * 4 * 25 * 512 == 307_200
    assert flops["relative"][1] - flops["sinusoidal"][1] == 6 * 4 * 30 * 512 == 368_640
    assert flops["rotary"] == flops["sinusoidal"]  # elementwise rotations are not counted


def test_peak_flops_of_known_gpus_by_precision():
    assert known_peak_flops("NVIDIA H100 80GB HBM3", "bf16-mixed") == 989e12
    assert known_peak_flops("NVIDIA H100 PCIe", "16-mixed") == 756e12
    assert known_peak_flops("NVIDIA A100-SXM4-80GB", "32-true") == 19.5e12
    assert known_peak_flops("Some Future GPU", "bf16-mixed") is None


def test_cross_attention_maps_drop_padding_and_their_rows_sum_to_one():
    model = make_model()  # pad id 0
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 11, 12, 13], [1, 14, 0, 0]])
    heads = cross_attention_maps(model, src, tgt_in, pad_id=0, layer=-1, heads="all")
    assert [tuple(m.shape) for m in heads] == [(4, 4, 5), (4, 2, 3)]  # padded rows and columns cut off
    for m in heads:
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]), rtol=0, atol=1e-6)
    alone = cross_attention_maps(model, src[1:, :3], tgt_in[1:, :2], pad_id=0, layer=-1, heads="all")[0]
    torch.testing.assert_close(heads[1], alone, rtol=0, atol=1e-6)  # padding changed nothing
    mean = cross_attention_maps(model, src, tgt_in, pad_id=0, layer=-1, heads="mean")
    torch.testing.assert_close(mean[1], heads[1].mean(0, keepdim=True))

    fig = plots.attention_figure(heads[1].numpy(), ["▁a", "b", "</s>"], ["x", "</s>"],
                                 [f"head {h}" for h in range(4)])
    axes = [ax for ax in fig.axes if ax.images]
    assert len(axes) == 4
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["▁a", "b", "</s>"]  # no padding column
    assert axes[0].images[0].get_array().shape == (2, 3)
    plots.close(fig)


def test_wandb_run_named_by_its_overrides_and_grouped_by_sweep_or_experiment(tmp_path):
    """logger=wandb's name is Hydra's job.override_dirname (the command line's overrides, sorted), in
    the config; an empty one is the run folder's name."""
    cfg = compose_config(tmp_path / "run", ["model.heads=2", "logger=wandb"])
    assert cfg.logger.wandb.name == "logger=wandb,model.heads=2"
    wandb = {"_target_": "lightning.pytorch.loggers.WandbLogger", "name": "", "group": None}
    assert wandb_names(cfg, wandb) == {"name": "run"}  # no experiment: no group
    assert wandb_names(cfg, {**wandb, "name": "mine"}) == {}  # a name in the config wins
    assert wandb_names(cfg, {"_target_": "lightning.pytorch.loggers.CSVLogger"}) == {}
    OmegaConf.set_readonly(cfg.hydra, False)
    with open_dict(cfg):
        cfg.hydra.mode = RunMode.MULTIRUN
        cfg.hydra.sweep.dir = str(tmp_path / "heads_2026-11-22")
        cfg.hydra.runtime.choices.experiment = "ablation/heads"
    HydraConfig().set_config(cfg)
    assert wandb_names(cfg, wandb) == {"name": "run", "group": "ablation/heads/heads_2026-11-22"}
