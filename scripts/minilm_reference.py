#!/usr/bin/env python3
"""Reference vectors for all-MiniLM-L6-v2, written once into tests/fixtures/minilm_reference.json.

The Rust embedder (`src/llm/minilm/`) is checked against these numbers by tests/minilm.rs. They
are computed here independently of the Rust code: the tokens by the `tokenizers` library from
the model's own tokenizer.json, the forward pass by a plain numpy transcription of BERT (the
equations of the original paper and Hugging Face's BertModel: post-layer-norm, exact erf GELU,
mean pooling over the attention mask, L2 normalisation). When `sentence-transformers` is
installed too, its vectors are computed as well and the script stops if the two disagree.

Usage (the model from scripts/fetch-model.sh; numpy and tokenizers from pip):
    python3 scripts/minilm_reference.py ~/.cache/bevy_generative_agents/models/all-MiniLM-L6-v2 \
        tests/fixtures/minilm_reference.json
"""

import json
import math
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

SENTENCES = [
    "Isabella Rodriguez is opening Hobbs Cafe for the morning.",
    "Klaus is writing his research paper on gentrification at the library.",
    "The stove in the kitchen is left on and the pot is boiling over!",
    "Maria asked Tom whether he'd come to the Valentine's Day party at 5 pm.",
    "Café crème, naïve résumé — Ünïcödé and 東京 punctuation...?!",
]
# Extra texts whose token ids the Rust tokenizer must reproduce (no forward pass needed).
TOKEN_CASES = SENTENCES + [
    "",
    "   ",
    "HELLO, World!!",
    "don't re-enter the co-op's back room",
    "unbelievably antidisestablishmentarianism",
    "email: john.smith@example.com, tel. +1 (555) 010-9999",
    "tab\there\nnewline\r\n carriage",
    "emoji 🙂 and symbols ™ © ½ °C",
    "中文字符和日本語のテキスト",
    "Ångström Þórr ßtraße Œuvre ﬁnance",
    "a" * 120,
    " ".join(["word"] * 300),
]
MAX_TOKENS = 256


def load_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
        out[name] = np.frombuffer(data[start:end], dtype=dtype).reshape(info["shape"])
    return out


def layer_norm(x, w, b, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def encode(tok, text):
    return tok.encode(text).ids


def forward(w, ids, heads=12):
    x64 = {k: v.astype(np.float64) for k, v in w.items() if v.dtype == np.float32}
    n = len(ids)
    h = (
        x64["embeddings.word_embeddings.weight"][ids]
        + x64["embeddings.position_embeddings.weight"][:n]
        + x64["embeddings.token_type_embeddings.weight"][0]
    )
    h = layer_norm(h, x64["embeddings.LayerNorm.weight"], x64["embeddings.LayerNorm.bias"])
    dim = h.shape[1]
    hd = dim // heads
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def lin(name, v):
            return v @ x64[p + name + ".weight"].T + x64[p + name + ".bias"]

        q = lin("attention.self.query", h).reshape(n, heads, hd).transpose(1, 0, 2)
        k = lin("attention.self.key", h).reshape(n, heads, hd).transpose(1, 0, 2)
        v = lin("attention.self.value", h).reshape(n, heads, hd).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, dim)
        h = layer_norm(
            lin("attention.output.dense", ctx) + h,
            x64[p + "attention.output.LayerNorm.weight"],
            x64[p + "attention.output.LayerNorm.bias"],
        )
        inter = gelu(lin("intermediate.dense", h))
        h = layer_norm(
            lin("output.dense", inter) + h,
            x64[p + "output.LayerNorm.weight"],
            x64[p + "output.LayerNorm.bias"],
        )
    pooled = h.mean(0)
    return pooled / np.linalg.norm(pooled)


def main():
    model_dir, out_path = sys.argv[1], sys.argv[2]
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    weights = load_safetensors(f"{model_dir}/model.safetensors")
    vectors = [forward(weights, encode(tok, s)).tolist() for s in SENTENCES]
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("sentence-transformers not installed: numpy reference only", file=sys.stderr)
    else:
        model = SentenceTransformer(model_dir, device="cpu")
        theirs = model.encode(SENTENCES, normalize_embeddings=True)
        for s, mine, other in zip(SENTENCES, vectors, theirs):
            cos = float(np.dot(mine, other))
            print(f"sentence-transformers vs numpy: cosine {cos:.6f}  {s!r}", file=sys.stderr)
            if cos < 0.9999:
                sys.exit("the numpy reference disagrees with sentence-transformers")
    fixture = {
        "model": "all-MiniLM-L6-v2",
        "made_by": "scripts/minilm_reference.py (tokenizers + numpy float64)",
        "max_tokens": MAX_TOKENS,
        "tokens": [{"text": t, "ids": encode(tok, t)} for t in TOKEN_CASES],
        "sentences": [{"text": s, "vector": [round(x, 7) for x in v]} for s, v in zip(SENTENCES, vectors)],
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
