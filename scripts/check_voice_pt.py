#!/usr/bin/env python3
"""Check that two PersonaPlex voice-prompt .pt files hold the same prompt.

    /usr/bin/python3 scripts/check_voice_pt.py A.pt B.pt

Both files are read with torch.load, exactly as the reference's
LMGen.load_voice_prompt_embeddings does (so a file written by the Go
voices.SavePT is proven loadable by real torch). Asserts that both have
"embeddings" [N,1,1,dim] with relative error <= 1e-4 (compared in float32) and
equal int64 "cache" [1,17,cols]. Needs torch (Debian: apt-get install
python3-torch). Exit status 0 when they match.
"""
import sys

import torch


def load(path):
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        state = torch.load(path, map_location="cpu")
    assert isinstance(state, dict), f"{path}: top object is {type(state).__name__}, not a dict"
    for key in ("embeddings", "cache"):
        assert key in state, f"{path}: missing key {key!r} (keys: {list(state)})"
        assert isinstance(state[key], torch.Tensor), f"{path}: {key!r} is not a tensor"
    emb, cache = state["embeddings"], state["cache"]
    assert emb.dim() == 4 and emb.shape[1] == 1 and emb.shape[2] == 1, f"{path}: embeddings shape {tuple(emb.shape)}"
    assert cache.dim() == 3 and cache.shape[0] == 1 and cache.shape[1] == 17, f"{path}: cache shape {tuple(cache.shape)}"
    print(f"{path}: embeddings {emb.dtype} {tuple(emb.shape)}, cache {cache.dtype} {tuple(cache.shape)}")
    return emb, cache


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    a_emb, a_cache = load(sys.argv[1])
    b_emb, b_cache = load(sys.argv[2])
    assert a_emb.shape == b_emb.shape, f"embeddings shapes differ: {tuple(a_emb.shape)} vs {tuple(b_emb.shape)}"
    a32, b32 = a_emb.float(), b_emb.float()
    rel = ((a32 - b32).norm() / b32.norm().clamp_min(1e-30)).item()
    assert rel <= 1e-4, f"embeddings differ: relative error {rel:.3g} > 1e-4"
    assert a_cache.dtype == b_cache.dtype == torch.int64, f"cache dtypes {a_cache.dtype}, {b_cache.dtype} (want int64)"
    assert torch.equal(a_cache, b_cache), "caches differ"
    exact = torch.equal(a32, b32)
    print(f"OK: embeddings relative error {rel:.3g}{' (bit-identical)' if exact else ''}, caches equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
