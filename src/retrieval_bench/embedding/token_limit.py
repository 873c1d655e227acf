"""How many texts the encoder cuts: sentence-transformers embeds a text from its first
max_seq_length tokens (special tokens included) and drops the rest without a word, so evidence
in a long chunk's tail can never be found by dense retrieval while the chunk still counts as
relevant. Counted with the model's own fast tokenizer (tokenizer.json, the `tokenizers` package:
no torch, no model load), over the distinct texts, so a cached run says it too."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BLOCK = 1_000  # texts tokenized at once


@dataclass(frozen=True)
class TokenLimit:
    """`cut` of `texts` are longer than the encoder's `limit` tokens (with its special tokens);
    `chosen`: the limit is max_seq_length's, set on purpose, not the model's own."""

    cut: int
    texts: int
    limit: int
    longest: int  # tokens of the longest text
    chosen: bool = False

    def line(self, unit: str) -> str:
        if self.chosen:
            return (
                f"{self.cut} of {self.texts} distinct {unit}s are cut at the {self.limit} tokens max_seq_length "
                f"sets (the longest {self.longest} tokens)"
            )
        remedy = (
            "shorter chunks (a chunking's chars), or a model that reads more"
            if unit == "chunk"
            else "a model that reads more"
        )
        return (
            f"warning: {self.cut} of {self.texts} distinct {unit}s are longer than the model's {self.limit}-token "
            f"limit (the longest {self.longest} tokens) and are embedded from their first {self.limit} tokens only: "
            f"{remedy}"
        )


def model_limit(model_path: str | Path, max_seq_length: int | None) -> int | None:
    """The tokens the encoder reads: `max_seq_length` when set, else the model's own
    (sentence_bert_config.json); None when neither says."""
    if max_seq_length:
        return int(max_seq_length)
    try:
        config = json.loads((Path(model_path) / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    limit = config.get("max_seq_length") if isinstance(config, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def token_limit(
    texts: list[str], model_path: str | Path, max_seq_length: int | None, prompt: str = ""
) -> TokenLimit | None:
    """How many of `texts` (each with `prompt` before it, as it is embedded) the encoder cuts; None
    when the model has no fast tokenizer file or no known limit (then nothing is said)."""
    limit = model_limit(model_path, max_seq_length)
    tokenizer_file = Path(model_path) / "tokenizer.json"
    if limit is None or not tokenizer_file.is_file() or not texts:
        return None
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception:  # another tokenizers format than this version reads: nothing to say
        return None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lengths = []
    for start in range(0, len(texts), BLOCK):  # only lengths kept: an Encoding holds ~36 KB of offsets and tokens
        block = tokenizer.encode_batch([prompt + text for text in texts[start : start + BLOCK]])
        lengths += [len(encoding.ids) for encoding in block]
    return TokenLimit(sum(length > limit for length in lengths), len(texts), limit, max(lengths), bool(max_seq_length))
