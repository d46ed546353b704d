"""How train_speed.py's --profile-steps sorts ops and kernels into categories. (loss_speed.py and
attention_speed.py at their CPU smoke sizes run in tests/e2e/test_gpu_script.py, as steps of the
GPU script: every system has numbers, the fused loss matches the plain one, packed attention
matches padded attention.)"""

from types import SimpleNamespace

from tests.helpers import load_script


def event(name: str, parent=None) -> SimpleNamespace:
    return SimpleNamespace(name=name, cpu_parent=parent)


def test_profile_categories_follow_the_innermost_range_then_the_op():
    train_speed = load_script("experiments/benchmarks/train_speed.py")
    category = train_speed.category
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
    assert train_speed.busy_us([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4
    assert list(train_speed.CATEGORIES) == ["matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle"]
