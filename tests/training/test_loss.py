"""The label-smoothed loss against a hand computation."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_mt.training.loss import chunk_loss, default_chunk_rows, label_smoothed_nll_loss, output_layer_loss


def test_matches_hand_computation():
    logits = torch.tensor([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4]]])  # (1, 2, V=4)
    target = torch.tensor([[1, 3]])
    eps, v = 0.1, 4
    expected_loss, expected_nll = 0.0, 0.0
    for t in range(2):
        y = int(target[0, t])
        row = logits[0, t].tolist()
        log_z = math.log(sum(math.exp(x) for x in row))
        logp = [x - log_z for x in row]
        for k in range(v):
            q = (1 - eps) * (k == y) + eps / v
            expected_loss -= q * logp[k]
        expected_nll -= logp[y]
    loss, nll, n = label_smoothed_nll_loss(logits, target, eps, ignore_index=0)
    assert loss.item() == pytest.approx(expected_loss, abs=1e-5)
    assert nll.item() == pytest.approx(expected_nll, abs=1e-5)
    assert n.item() == 2


def test_ignores_padding_and_equals_torch_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0
    target[2, 1:] = 0
    loss, nll, n = label_smoothed_nll_loss(logits, target, 0.2, ignore_index=0)
    ref = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, label_smoothing=0.2, reduction="sum")
    ref_nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    assert nll.item() == pytest.approx(ref_nll.item(), rel=1e-5)
    assert n.item() == int((target != 0).sum())
    # changing logits at padded positions changes nothing
    logits2 = logits.clone()
    logits2[2, 1:] += 100.0
    assert label_smoothed_nll_loss(logits2, target, 0.2, 0)[0].item() == pytest.approx(loss.item(), rel=1e-6)


def test_epsilon_zero_is_plain_nll():
    logits = torch.randn(2, 4, 7)
    target = torch.randint(1, 7, (2, 4))
    loss, nll, _ = label_smoothed_nll_loss(logits, target, 0.0, ignore_index=0)
    assert loss.item() == pytest.approx(nll.item(), rel=1e-6)


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("chunk_rows", [7, 1000])  # many chunks with a ragged last one; one chunk
@pytest.mark.parametrize(("vocab", "epsilon"), [(30, 0.1), (37, 0.0), (1009, 0.2)])  # sizes that divide nothing
def test_output_layer_loss_equals_the_plain_path_in_values_and_gradients(with_bias, chunk_rows, vocab, epsilon):
    """The fused output layer + loss (chunked logits, the one-hot and smoothing terms analytic)
    gives the sums and the gradients (hidden states, weight, bias) of linear ->
    label_smoothed_nll_loss in fp32, padding excluded."""
    torch.manual_seed(0)
    hidden = torch.randn(4, 9, 16, requires_grad=True)
    weight = (torch.randn(vocab, 16) * 0.3).requires_grad_()
    bias = (torch.randn(vocab) * 0.3).requires_grad_() if with_bias else None
    target = torch.randint(1, vocab, (4, 9))
    target[1, 5:] = 0
    target[3, 2:] = 0
    params = [hidden, weight] + ([bias] if with_bias else [])
    plain = label_smoothed_nll_loss(F.linear(hidden, weight, bias), target, epsilon, 0)
    expected = torch.autograd.grad(plain[0] * 3.0, params)
    fused = output_layer_loss(hidden, weight, bias, target, epsilon, 0, chunk_rows=chunk_rows)
    got = torch.autograd.grad(fused[0] * 3.0, params)
    torch.testing.assert_close(fused[0], plain[0], atol=1e-4, rtol=1e-6)
    torch.testing.assert_close(fused[1], plain[1], atol=1e-4, rtol=1e-6)
    assert int(fused[2]) == int(plain[2]) == 4 * 9 - 4 - 7
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    assert got[0][3, 2:].abs().sum() == 0  # padding positions get no gradient


def test_what_padding_rows_hold_changes_nothing():
    torch.manual_seed(0)
    hidden, weight = torch.randn(20, 8), torch.randn(13, 8, requires_grad=True)
    target = torch.randint(1, 13, (20,))
    target[15:] = 0
    first = output_layer_loss(hidden, weight, None, target, 0.1, 0, chunk_rows=6)
    grad = torch.autograd.grad(first[0], weight)[0]
    hidden[15:] = 1e4
    second = output_layer_loss(hidden, weight, None, target, 0.1, 0, chunk_rows=6)
    assert torch.equal(second[0], first[0]) and torch.equal(torch.autograd.grad(second[0], weight)[0], grad)


@pytest.mark.parametrize("with_bias", [False, True])
def test_under_bf16_autocast_the_fused_loss_is_within_its_stated_tolerance(with_bias, record_property):
    """bf16 logits and softmax, fp32 log-sum-exp and accumulation: the loss within 2e-4 of the
    fp32 reference (relative), each gradient within 1% of its largest entry."""
    torch.manual_seed(0)
    hidden = torch.randn(300, 64, requires_grad=True)
    weight = (torch.randn(1009, 64) * 0.125).requires_grad_()
    bias = (torch.randn(1009) * 0.1).requires_grad_() if with_bias else None
    params = [hidden, weight] + ([bias] if with_bias else [])
    target = torch.randint(1, 1009, (300,))
    target[250:] = 0
    exact = label_smoothed_nll_loss(F.linear(hidden, weight, bias), target, 0.1, 0)
    g_exact = torch.autograd.grad(exact[0], params)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = output_layer_loss(hidden, weight, bias, target, 0.1, 0, chunk_rows=64)
    g_low = torch.autograd.grad(low[0], params)
    record_property("loss_apart", abs(float(low[0] - exact[0])) / float(exact[0]))
    record_property("nll_apart", abs(float(low[1] - exact[1])) / float(exact[1]))
    record_property("grad_apart", max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g_low, g_exact)))
    assert low[0].dtype == low[1].dtype == torch.float32
    assert abs(float(low[0] - exact[0])) < 2e-4 * float(exact[0])
    assert abs(float(low[1] - exact[1])) < 2e-4 * float(exact[1])
    for a, b in zip(g_low, g_exact):
        assert a.dtype == b.dtype == torch.float32
        assert (a - b).abs().max() < 0.01 * b.abs().max()


def test_chunks_are_cache_sized_on_a_cpu_and_whole_tiles_of_about_2_to_the_27_logits_on_a_gpu():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert default_chunk_rows(37000, cpu) == (1 << 20) // 37000 == 28  # as before
    assert default_chunk_rows(2_000_000, cpu) == 1
    for vocab in (8000, 32000, 37000, 58101, 250_000):
        rows = default_chunk_rows(vocab, cuda)
        assert rows % 128 == 0 and (1 << 27) - 128 * vocab < rows * vocab <= 1 << 27, vocab
    assert default_chunk_rows(37000, cuda) == 3584
    assert default_chunk_rows(2_000_000, cuda) == 128  # at least one tile


COMPILED_CHUNKS: list[int] = []


def counted(gm, example_inputs):
    """aot_eager, counting the graphs it compiles."""
    COMPILED_CHUNKS.append(len(gm.graph.nodes))
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


@pytest.mark.parametrize("autocast", [False, True])
def test_the_compiled_chunk_body_is_one_graph_for_every_batch_and_equals_the_eager_one(autocast):
    """module.compile's chunk body gets chunks of one fixed shape (the last one padded), so one
    graph serves batches of any size (smaller than a chunk, a multiple of it, ragged); its sums
    and gradients equal the eager chunks', in fp32 and under bf16 autocast."""
    torch._dynamo.reset()
    COMPILED_CHUNKS.clear()
    compiled = torch.compile(chunk_loss, fullgraph=True, dynamic=False, backend=counted)
    weight = (torch.randn(70, 32) * 0.2).requires_grad_()
    for rows in (5, 16, 45, 8, 33):
        torch.manual_seed(rows)
        hidden = torch.randn(rows, 32, requires_grad=True)
        target = torch.randint(1, 70, (rows,))
        target[rows // 2:rows // 2 + 2] = 0
        results = []
        for chunk_fn in (None, compiled):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss, nll, count = output_layer_loss(hidden, weight, None, target, 0.1, 0, chunk_rows=8,
                                                     chunk_fn=chunk_fn)
            results.append((loss, nll, count, *torch.autograd.grad(loss, [hidden, weight])))
        for eager, fused in zip(*results):
            torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-5)
    assert len(COMPILED_CHUNKS) == 1, COMPILED_CHUNKS


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("vocab, multiple", [(37, 16), (100, 128), (64, 8)])
def test_the_padded_vocabulary_gives_todays_loss_and_gradients(bias, vocab, multiple):
    """module.vocab_multiple: the products over a vocabulary padded to a multiple (the padded
    logits masked with -inf: probabilities of exactly 0) give the unpadded loss, NLL and gradients,
    in chunks, with padding targets (fp32: equal up to the order of the sums, which the padded
    products' extra zeros change); the gradients keep the weight's shape."""
    torch.manual_seed(vocab)
    hidden = torch.randn(23, 16, requires_grad=True)
    weight = torch.randn(vocab, 16, requires_grad=True)
    b = torch.randn(vocab, requires_grad=True) if bias else None
    target = torch.randint(1, vocab, (23,))
    target[5:9] = 0
    results = []
    for m in (1, multiple):
        loss, nll, count = output_layer_loss(hidden, weight, b, target, 0.1, 0, chunk_rows=7, vocab_multiple=m)
        inputs = [hidden, weight] + ([b] if bias else [])
        results.append((loss, nll, count, *torch.autograd.grad(loss, inputs)))
    for plain, padded in zip(*results, strict=True):
        assert padded.shape == plain.shape
        torch.testing.assert_close(padded, plain, rtol=1e-6, atol=1e-6 * float(plain.abs().max()))
    reference = label_smoothed_nll_loss(F.linear(hidden, weight, b), target, 0.1, 0)
    torch.testing.assert_close(results[1][0], reference[0], rtol=1e-6, atol=0)


def test_the_padded_vocabulary_under_bf16_autocast_stays_within_the_fused_paths_bound():
    """Under autocast the padded products round as the unpadded ones do: the loss within 2e-4."""
    torch.manual_seed(1)
    hidden, weight = torch.randn(40, 32), (torch.randn(100, 32) * 0.2).requires_grad_()
    target = torch.randint(1, 100, (40,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = output_layer_loss(hidden, weight, None, target, 0.1, 0)[0]
        padded = output_layer_loss(hidden, weight, None, target, 0.1, 0, vocab_multiple=128)[0]
    assert torch.isfinite(padded) and abs(padded.item() - plain.item()) <= 2e-4 * abs(plain.item())
