#!/usr/bin/python3
"""Regenerate testdata/tokenizers/: small SentencePiece models and the
reference tokenizations the Go tokenizer (package prompts) is tested against.

Needs Debian's python3-sentencepiece (0.1.97, the version that made
testdata/tiny/tokenizer_cases.json):

    apt-get install -y python3-sentencepiece
    /usr/bin/python3 scripts/make_tokenizer_fixtures.py

Everything is deterministic: the training corpus is the sorted regular files
of /usr/share/common-licenses plus a fixed multilingual snippet, training runs
on one thread, and every path the trainer records in the model
(trainer_spec.input, model_prefix, rule TSVs) is relative to a scratch
directory. Running the script twice gives byte-identical files.

Models written (all small: only the two NFKC ones carry the ~240 KB charsmap):

  bpe_nfkc.model          BPE, nmt_nfkc (the PersonaPlex normalizer), vocab 500
  unigram_bytes_cf.model  unigram, byte_fallback, nfkc_cf (case folding),
                          user-defined "<system>"/"PersonaPlex", control
                          "<ctrl>", split_digits, vocab 600
  bpe_bytes_rules.model   BPE, byte_fallback, custom normalization TSV (multi-
                          character and deletion rules) and denormalization
                          TSV, user-defined "<system>", no dummy prefix, extra
                          whitespace kept, vocab 500
  unigram_suffix_unused.model
                          unigram, identity normalizer,
                          treat_whitespace_as_suffix, unk_surface "[?]",
                          vocabulary restricted with set_vocabulary (UNUSED
                          pieces), vocab 400
  bpe_unused.model        BPE, identity, vocabulary restricted (UNUSED pieces
                          are split back by the merge history), vocab 400
  char.model, word.model  CHAR and WORD models, identity normalizer

For each NAME.model, NAME_cases.json holds {"encode": [{"text", "ids",
"pieces", "decoded"}], "decode": [{"ids", "decoded"}]} with ids =
encode(text), pieces = [id_to_piece(i) for i in ids], decoded = decode(ids).
Cases whose input is not valid UTF-8 carry "text_b64" (the raw bytes, base64)
instead of "text". tiny_extra_cases.json does the same for
testdata/tiny/tokenizer.model (adding "decoded" and the extra strings).
"""

import base64
import json
import os
import shutil
import sys
import tempfile

import sentencepiece as spm

assert spm.__version__ == "0.1.97", "want Debian's sentencepiece 0.1.97, got " + spm.__version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "testdata", "tokenizers")
TINY = os.path.join(ROOT, "testdata", "tiny")

MULTILINGUAL = """\
Café au lait, naïve résumé, Zürich über Öl, Ångström, Straße, façade, jalapeño.
Crème brûlée and piñata; coöperate with the rôle of the élite.
日本語のテキストです。東京は大きい都市です。
中文测试，这是一个句子。你好，世界！
한국어 문장입니다. 안녕하세요.
Привет, мир! Это тестовое предложение.
Γειά σου κόσμε. Αυτή είναι μια πρόταση.
Hello 😀 world 🙂 emoji 🎉 test.
You enjoy having a good conversation. <system> PersonaPlex <system>
You are a wise and friendly teacher. Answer questions or provide advice in a clear and engaging way.
"""

NORM_RULES = [
    # source code points <TAB> target code points (empty target: delete)
    "41 42\t78",  # "AB" -> "x" (longer than the next rule: longest match wins)
    "41\t61",  # "A" -> "a"
    "41 42 43\t79 79",  # "ABC" -> "yy"
    "E9\t65 301",  # e-acute -> e + combining acute
    "3000\t20",  # ideographic space -> space
    "9\t20",  # tab -> space
    "A0\t20",  # no-break space -> space
    "2019\t27",  # right single quote -> apostrophe
    "AD\t",  # soft hyphen deleted
    "200B\t",  # zero-width space deleted
    "1F600\t3A 29",  # grinning face -> ":)"
    "31 32 33\t6F 6E 65 20 74 77 6F",  # "123" -> "one two"
]

DENORM_RULES = [
    "3A 29\t1F600",  # ":)" -> grinning face
    "78\t58",  # "x" -> "X"
]


def corpus_text():
    d = "/usr/share/common-licenses"
    parts = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            parts.append(f.read())
    parts.append(MULTILINGUAL * 3)
    return "\n".join(parts)


def cases_texts():
    with open(os.path.join(TINY, "tokenizer_cases.json"), encoding="utf-8") as f:
        texts = [c["text"] for c in json.load(f)]
    extra = [
        # byte-fallback / unknown triggers
        "😀",
        "😀😀😀 abc 😀x😀",
        "👨‍👩‍👧 family",
        "🇫🇷 flag",
        "日本語のテキストです。",
        "東京",
        "中文测试，这是一个句子。",
        "안녕하세요",
        "مرحبا بالعالم",
        "שלום עולם",
        "สวัสดีครับ",
        "नमस्ते दुनिया",
        "Ελληνικά ΣΑΣ",
        "İstanbul ǅ ß ẞ",
        "e\u0301 vs é",
        "ﬃ ① ｶﾀｶﾅ Å Ω",
        "\u2003em\u2003space\u3000ideographic",
        "a\u00a0\u00a0b",
        "  \t  x  \n ",
        "\u200b\u200b",
        "\u00ad",
        "a\x00b",
        "x\x01y\x7f",
        # user-defined / control / byte / space-symbol lookalikes as text
        "<system>hello<system>",
        "PersonaPlex is here",
        "PersonaPlexPersonaPlex",
        "<ctrl> <s> </s> <unk> <pad>",
        "<0x41><0xE2>",
        "▁",
        "▁▁hello",
        "hello▁",
        "a ▁ b",
        # normalization-rule triggers
        "AB ABC ABCD A",
        "It’s 123 o’clock",
        "café 😀 :)",
        # digits, punctuation
        "1234567890 3.14 2,000,000",
        "Mr. O'Neil's co-op, 50% off!!! (really?)",
        "tabs\t\tand\n\nnewlines\r\n",
        "x" * 300,
        "ab" * 100,
        "The quick brown fox " * 20,
    ]
    return texts + extra


BYTES_CASES = [b"a\xffb", b"\xc3", b"\xe2\x96", b"ok\xf0\x9f\x98", b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong"]


def make_cases(sp, texts):
    out = []
    for t in texts:
        ids = sp.encode(t)
        out.append({"text": t, "ids": ids, "pieces": [sp.id_to_piece(i) for i in ids], "decoded": sp.decode(ids)})
    for b in BYTES_CASES:
        ids = sp.encode(b)
        out.append(
            {
                "text_b64": base64.b64encode(b).decode("ascii"),
                "ids": ids,
                "pieces": [sp.id_to_piece(i) for i in ids],
                "decoded": sp.decode(ids),
            }
        )
    return out


def decode_cases(sp):
    """decode() of hand-picked id sequences: controls, unknowns, leading "▁", bytes."""
    n = sp.get_piece_size()
    seqs = [
        [],
        list(range(min(n, 40))),
        [sp.unk_id(), sp.unk_id()],
        [i for i in range(n) if sp.id_to_piece(i).startswith("▁")][:5],
        [i for i in range(n) if sp.id_to_piece(i).startswith("<0x")][:8],
        [i for i in range(n) if sp.id_to_piece(i).startswith("<0x")][200:203] + [n - 1],
        list(range(n - 10, n)),
    ]
    return [{"ids": s, "decoded": sp.decode(s)} for s in seqs]


def write_json(path, obj):
    """{"encode": [...], "decode": [...]}, one case per line."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, key in enumerate(obj):
            f.write(json.dumps(key) + ": [\n")
            items = obj[key]
            for i, item in enumerate(items):
                f.write(" " + json.dumps(item, ensure_ascii=False) + ("," if i + 1 < len(items) else "") + "\n")
            f.write("]" + ("," if k + 1 < len(obj) else "") + "\n")
        f.write("}\n")


def train(work, name, **kw):
    args = dict(
        input="corpus.txt",
        model_prefix=name,
        num_threads=1,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    args.update(kw)
    spm.SentencePieceTrainer.train(**args)
    with open(os.path.join(work, name + ".model"), "rb") as f:
        return f.read()


def restrict(model, keep):
    """set_vocabulary on a fresh processor, then the re-serialized model."""
    sp = spm.SentencePieceProcessor(model_proto=model)
    vocab = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if keep(i)]
    sp.set_vocabulary(vocab)
    return sp.serialized_model_proto()


def main():
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="spm_fixtures_")
    cwd = os.getcwd()
    try:
        os.chdir(work)
        with open("corpus.txt", "w", encoding="utf-8") as f:
            f.write(corpus_text())
        with open("norm_rules.tsv", "w", encoding="utf-8") as f:
            f.write("\n".join(NORM_RULES) + "\n")
        with open("denorm_rules.tsv", "w", encoding="utf-8") as f:
            f.write("\n".join(DENORM_RULES) + "\n")

        models = {}
        models["bpe_nfkc"] = train(work, "bpe_nfkc", model_type="bpe", vocab_size=500)
        models["unigram_bytes_cf"] = train(
            work,
            "unigram_bytes_cf",
            model_type="unigram",
            vocab_size=600,
            byte_fallback=True,
            normalization_rule_name="nfkc_cf",
            user_defined_symbols=["<system>", "PersonaPlex"],
            control_symbols=["<ctrl>"],
            split_digits=True,
        )
        models["bpe_bytes_rules"] = train(
            work,
            "bpe_bytes_rules",
            model_type="bpe",
            vocab_size=500,
            byte_fallback=True,
            normalization_rule_tsv="norm_rules.tsv",
            denormalization_rule_tsv="denorm_rules.tsv",
            user_defined_symbols=["<system>"],
            add_dummy_prefix=False,
            remove_extra_whitespaces=False,
        )
        suffix = train(
            work,
            "unigram_suffix",
            model_type="unigram",
            vocab_size=400,
            normalization_rule_name="identity",
            treat_whitespace_as_suffix=True,
            unk_surface="[?]",
            pad_id=3,
        )
        models["unigram_suffix_unused"] = restrict(suffix, lambda i: i % 3 != 0)
        bpe_id = train(work, "bpe_identity", model_type="bpe", vocab_size=400, normalization_rule_name="identity")
        models["bpe_unused"] = restrict(bpe_id, lambda i: i % 4 != 1)
        models["char"] = train(work, "char", model_type="char", vocab_size=200, normalization_rule_name="identity")
        models["word"] = train(work, "word", model_type="word", vocab_size=300, normalization_rule_name="identity")
    finally:
        os.chdir(cwd)
        shutil.rmtree(work)

    texts = cases_texts()
    for name, blob in models.items():
        assert len(blob) < 300 * 1024, name
        path = os.path.join(OUT, name + ".model")
        with open(path, "wb") as f:
            f.write(blob)
        # Load back from the file, as the Go side does.
        sp = spm.SentencePieceProcessor(model_file=path)
        write_json(os.path.join(OUT, name + "_cases.json"), {"encode": make_cases(sp, texts), "decode": decode_cases(sp)})
        print(f"{name}: {len(blob)} bytes, {sp.get_piece_size()} pieces", file=sys.stderr)

    sp = spm.SentencePieceProcessor(model_file=os.path.join(TINY, "tokenizer.model"))
    write_json(os.path.join(OUT, "tiny_extra_cases.json"), {"encode": make_cases(sp, texts), "decode": decode_cases(sp)})


if __name__ == "__main__":
    main()
