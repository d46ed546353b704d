"""inter_threads / intra_threads in task=translate: several decoders, each on batches of its own,
write exactly what one decoder writes, in input order (greedy, beam, int8), and the log says how
many decoded."""

import pytest

from tests.helpers import compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("decoding", [["decoding=greedy"], ["decoding=beam", "decoding.nbest=2", "quantize=int8"]])
def test_several_decoders_write_what_one_writes(toy_run, tmp_path, caplog, decoding):
    out, _ = toy_run
    (tmp_path / "in.txt").write_text("\n".join(ToyCorpus().load("test").src[:120]) + "\n")

    def translate(name: str, *threads: str) -> list[str]:
        overrides = ["task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", f"task.input={tmp_path}/in.txt",
                     f"task.output={tmp_path}/{name}.txt", "task.max_tokens=200", *decoding, *threads]
        run(compose_config(tmp_path / name, overrides))
        return (tmp_path / f"{name}.txt").read_text().splitlines()

    one = translate("one", "inter_threads=1", "intra_threads=1")
    with caplog.at_level("INFO", logger="transformer_mt.tasks.translate"):
        three = translate("three", "inter_threads=3", "intra_threads=1")  # 120 lines in about 12 batches
    assert three == one and len(one) == 120 * (2 if "decoding.nbest=2" in decoding else 1)
    assert "3 decoders x 1 thread" in caplog.text
