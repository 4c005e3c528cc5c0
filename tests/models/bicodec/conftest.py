"""BiCodec fixtures: Spark's BiCodec on random weights at a small size, saved as Spark's model
folder, once per session, built on first use (the released size: test_released.py's own)."""

from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

import audiotok
from audiotok.models.bicodec.llm import MARKERS
from tests.models.bicodec import reference

SPECS = {"tiny": reference.TINY}


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """name -> SimpleNamespace(ref: Spark's BiCodec, w2v: its wav2vec2, tok: Spark's tokenizer
    around them, folder: the model folder, codec: ours loaded from it), saved with the released
    file's weight-norm spelling."""
    built = {}

    def get(name):
        if name not in built:
            spec = SPECS[name]
            model, w2v = reference.build(spec), reference.wav2vec2(spec)
            folder = reference.save_folder(model, w2v, spec,
                                           tmp_path_factory.mktemp(f"bicodec_{name}"))
            built[name] = SimpleNamespace(ref=model, w2v=w2v, folder=folder,
                                          tok=reference.tokenizer(model, w2v),
                                          codec=audiotok.load(folder))
        return built[name]

    return get


@pytest.fixture(scope="session")
def spark_tok(tmp_path_factory):
    """A tokenizer holding Spark's markers (special) and the bicodec tokens (plain added
    tokens, as Spark's: its output is read after skipping special tokens), in a shuffled
    order: ids are looked up one by one."""
    path = tmp_path_factory.mktemp("spark") / "tokenizer.json"
    words = ["[UNK]", "hello", "world"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ["<|im_end|>", "<|task_tts|>", *MARKERS]])
    names = [f"<|bicodec_semantic_{i}|>" for i in range(8192)] + \
        [f"<|bicodec_global_{i}|>" for i in range(4096)]
    order = np.random.default_rng(0).permutation(len(names))
    tok.add_tokens([AddedToken(names[i], special=False, normalized=False) for i in order])
    tok.save(str(path))
    return path, tok
