"""The allowed values of the config keys that take one of a set, each set defined once: the schema
(transformer_mt.schema) checks the composed config with them, and the code that acts on a value
imports its set from here. Only tuples: every layer may import this module."""

QUANTIZE = ("none", "int8")  # quantize: how test, evaluate, translate and score decode
CT2_QUANTIZATIONS = ("none", "int8", "int8_float16", "int8_float32", "float16", "bfloat16")  # task.quantization
EXPORT_FORMATS = ("hf", "ct2")  # task.format
ENGINES = ("ours", "ctranslate2")  # task.engine
LONG_LINES = ("error", "skip", "truncate")  # task.long_lines
ALIGNMENT_UNITS = ("words", "subwords")  # task.alignment_unit
ALIGNMENT_HEADS = ("mean", "max")  # task.alignment_heads (or a head number)
TOKENIZED_BLEU = (False, True, "compound")  # task.tokenized_bleu
SPLITS = ("train", "val", "test")  # a corpus's splits; data.split
MATMUL_PRECISIONS = ("highest", "high", "medium")  # float32_matmul_precision
OWN_LAST = "last"  # ckpt_path=last: a training run's own checkpoints/last.ckpt (tasks/runs/rerun.py)
SHORTLIST_SCORINGS = ("dice", "probability")  # task.scoring (task=shortlist)
KERNELS = ("auto", "default")  # kernels: how a decoding copy's linear layers pick their kernels
ACTIVATIONS = ("relu", "gelu", "swish")  # model.activation
POSITIONS = ("sinusoidal", "learned", "rotary", "relative", "fairseq")  # model.positional
TIES = ("all", "decoder", "none")  # model.tie_embeddings
PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "transformer-engine",
              "transformer-engine-float16", "32", "16", "bf16", "64")  # trainer.precision (Lightning's; 32, 16, 64 too)
