"""Small tokenizer.json files, one per group of Hugging Face components that the published
files (Llama 3's, Qwen3's, Gemma 3's) do not use, for check.sh to compare with Hugging
Face's own implementation: Llama 2's SentencePiece-style BPE (Prepend and Replace, byte
fallback, unknown tokens fused, a Strip decoder), Metaspace with each prepend scheme,
Digits and Split's Removed and Isolated, NFKC with Lowercase and Strip, a word
suffix, added tokens with lstrip/rstrip/normalized, and GPT-2's ByteLevel with
its regex and prefix space. Each model's vocabulary and merges are learnt here, by plain
BPE over `texts` (the checks' own texts), so most of them are exercised.

Usage: hf_components.py TEXTS_JSON OUT_DIR   (writes OUT_DIR/NAME/tokenizer.json and an
empty tokenizer_config.json for each NAME, and prints the names)
"""
import collections
import json
import pathlib
import sys

SPACE = "\u2581"


def learn(words, merges_wanted, alphabet):
    """Plain BPE over `words` (lists of symbols): the vocabulary and the merges."""
    vocab = {}
    for symbol in alphabet:
        vocab.setdefault(symbol, len(vocab))
    words = [list(w) for w in words if w]
    merges = []
    for _ in range(merges_wanted):
        pairs = collections.Counter()
        for w in words:
            pairs.update(zip(w, w[1:]))
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda item: (item[1], item[0]))
        merges.append([a, b])
        vocab.setdefault(a + b, len(vocab))
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i : i + 2] = [a + b]
                i += 1
    return vocab, merges


def bpe(vocab, merges, **options):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": vocab, "merges": merges}
    model.update(options)
    return model


def tokenizer(model, normalizer=None, pre_tokenizer=None, decoder=None, added=(), post=None):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post,
            "decoder": decoder, "model": model}


def added_token(id_, content, special=True, **flags):
    token = {"id": id_, "content": content, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": special}
    token.update(flags)
    return token


def llama2_style(texts):
    # Llama 2's tokenizer.json: no pre-tokenizer, spaces as U+2581 with one prepended, byte
    # fallback for characters the vocabulary lacks (here: every non-ASCII one).
    corpus = [SPACE + t.replace(" ", SPACE) for t in texts[:6]]
    alphabet = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    alphabet += sorted({c for t in corpus for c in t if ord(c) < 128 or c == SPACE})
    vocab, merges = learn([[c for c in t if ord(c) < 128 or c == SPACE] for t in corpus], 300,
                          alphabet)
    return tokenizer(
        bpe(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True),
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        decoder={"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        added=[added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")],
        post={"type": "TemplateProcessing",
              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}}],
              "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})


def metaspace(texts, scheme):
    words = [SPACE + w for t in texts[:6] for w in t.split()]
    alphabet = ["<unk>"] + sorted({c for w in words for c in w})
    vocab, merges = learn(words, 200, alphabet)
    return tokenizer(
        bpe(vocab, merges, unk_token="<unk>"),
        pre_tokenizer={"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme,
                       "split": True},
        decoder={"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme,
                 "split": True},
        added=[added_token(0, "<unk>"), added_token(len(vocab), "<sep>")])


def splits(texts):
    # Digits one by one, and Split's Removed and Isolated. (The JavaScript port treats
    # MergedWithPrevious, MergedWithNext, Contiguous and invert otherwise than the Rust
    # library: those are checked against the library's rules in huggingface_tokenizer_test.)
    words = [w for t in texts[:6] for w in t.split()]
    alphabet = ["<unk>"] + sorted({c for w in words for c in w})
    vocab, merges = learn(words, 150, alphabet)
    def split(pattern, behavior):
        return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": False}
    return tokenizer(
        bpe(vocab, merges, unk_token="<unk>"),
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            split({"Regex": " "}, "Removed"),  # a String here keeps its matches in the port
            split({"Regex": "[,.;:!?-]"}, "Isolated")]},
        decoder={"type": "Fuse"})


def nfkc_lowercase(texts):
    words = [w.lower() for t in texts[:6] for w in t.split()]
    alphabet = ["[UNK]"] + sorted({c for w in words for c in w})
    vocab, merges = learn(words, 150, alphabet)
    # Digits run together here; a word suffix marks each piece's last token. (Hugging
    # Face's JavaScript port has no continuing_subword_prefix for BPE: that one is checked
    # against the Rust library's rule in tokenizer/huggingface/huggingface_tokenizer_test.)
    suffixed = dict(vocab)
    for token in vocab:
        suffixed.setdefault(token + "</w>", len(suffixed))
    return tokenizer(
        bpe(suffixed, [], unk_token="[UNK]", end_of_word_suffix="</w>"),
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"},
            {"type": "Strip", "strip_left": True, "strip_right": True}]},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed",
             "invert": False},
            {"type": "Digits", "individual_digits": False}]},
        decoder={"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "</w>"}, "content": " "}]})


def byte_level(texts):
    # GPT-2's own: ByteLevel with its regex and a prefix space, and added tokens with
    # lstrip, rstrip and normalized. (The JavaScript port ignores single_word: that one is
    # checked against the Rust library's rule in huggingface_tokenizer_test.)
    byte_chars = []
    for b in range(256):
        c = chr(b) if (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255) else None
        byte_chars.append(c)
    n = 0
    for b in range(256):
        if byte_chars[b] is None:
            byte_chars[b] = chr(256 + n)
            n += 1
    def spell(text):
        return "".join(byte_chars[b] for b in text.encode("utf-8"))
    words = [spell(" " + w) for t in texts[:8] for w in t.split()]
    vocab, merges = learn(words, 400, byte_chars)
    merges = [f"{a} {b}" for a, b in merges]  # merges as strings, as GPT-2's file has them
    top = len(vocab)
    return tokenizer(
        bpe(vocab, merges),
        pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                 "use_regex": True},
        added=[added_token(top, "<|endoftext|>"),
               added_token(top + 1, "[MASK]", lstrip=True),
               added_token(top + 2, "<sep>", rstrip=True),
               added_token(top + 3, "word", special=False),
               added_token(top + 4, "hello", special=False, normalized=True)])


def main():
    texts = json.load(open(sys.argv[1], encoding="utf-8"))
    out = pathlib.Path(sys.argv[2])
    made = {
        "llama2-style": llama2_style(texts),
        "metaspace-always": metaspace(texts, "always"),
        "metaspace-first": metaspace(texts, "first"),
        "metaspace-never": metaspace(texts, "never"),
        "splits": splits(texts),
        "nfkc-lowercase": nfkc_lowercase(texts),
        "byte-level": byte_level(texts),
    }
    for name, content in made.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "tokenizer.json").write_text(json.dumps(content, ensure_ascii=False))
        (out / name / "tokenizer_config.json").write_text("{}")
        print(name)


if __name__ == "__main__":
    main()
