"""Chunking: sizes, overlap, natural boundaries, stable offsets."""

import pytest

from retrieval_bench.corpus.chunk import chunk_id, chunk_spans

PARAGRAPHS = "\n\n".join(
    f"Paragraph {i} talks about topic {i}. It has a second sentence here. And a third one to pad it out."
    for i in range(20)
)


@pytest.mark.parametrize("size,overlap", [(200, 0), (200, 50), (400, 100), (1000, 300)])
def test_spans_cover_text_within_size_and_overlap(size, overlap):
    spans = chunk_spans(PARAGRAPHS, size, overlap)
    assert spans[0][0] == 0 and spans[-1][1] == len(PARAGRAPHS)
    for (start, end), (next_start, _) in zip(spans, spans[1:]):
        assert 0 < end - start <= size
        assert start < next_start
        assert PARAGRAPHS[end:next_start].strip() == ""  # only whitespace falls between chunks
        assert end - next_start <= overlap  # never more overlap than asked
    for start, end in spans:
        text = PARAGRAPHS[start:end]
        assert text == text.strip()


def test_chunks_end_at_paragraph_then_sentence_boundaries():
    spans = chunk_spans(PARAGRAPHS, 250, 0)
    for start, end in spans[:-1]:
        assert PARAGRAPHS[end : end + 2] == "\n\n"  # a paragraph fits in the second half of 250 chars
    sentences = "One sentence ends here. " * 40
    for start, end in chunk_spans(sentences, 100, 0)[:-1]:
        assert sentences[start:end].endswith(".")


def test_overlap_starts_at_a_word_and_long_words_are_cut():
    text = "alpha beta gamma delta epsilon " * 30
    for start, _ in chunk_spans(text, 60, 20):
        assert start == 0 or text[start - 1] == " "
    unbroken = "x" * 250
    # No word start inside the overlap: the next chunk starts where this one was cut.
    assert chunk_spans(unbroken, 100, 10) == [(0, 100), (100, 200), (200, 250)]


def test_offsets_and_ids_are_stable():
    spans = chunk_spans(PARAGRAPHS, 300, 60)
    assert spans == chunk_spans(PARAGRAPHS, 300, 60)
    assert chunk_id("doc.md", *spans[1]) == f"doc.md:{spans[1][0]}-{spans[1][1]}"


def test_whitespace_and_bad_settings():
    assert chunk_spans("  \n\n  ", 100, 10) == []
    assert chunk_spans("  hello  ", 100, 10) == [(2, 7)]
    with pytest.raises(ValueError):
        chunk_spans("text", 0, 0)
    with pytest.raises(ValueError):
        chunk_spans("text", 10, 10)


def test_text_without_spaces_ends_chunks_at_full_width_sentence_ends_and_keeps_the_overlap():
    """Chinese and Japanese put no space between sentences or words: chunks were cut at exact
    character counts mid-sentence, and the overlap was lost (the next start moved to the chunk's end)."""
    sentence = "東京は日本の首都であり、政治と経済の中心です。人口は約千四百万人で、世界有数の大都市です。"
    text = sentence * 10
    spans = chunk_spans(text, 100, 30)
    assert all(text[end - 1] == "。" for _, end in spans[:-1])
    assert all(0 < previous_end - start <= 40 for (_, previous_end), (start, _) in zip(spans, spans[1:]))
    assert spans[-1][1] == len(text) and all(end - start <= 100 for start, end in spans)
    # text with spaces is cut as before: a word start, never mid-word; Korean too (it spaces its words)
    assert chunk_spans("alpha beta. gamma delta epsilon", 20, 8) == [(0, 11), (6, 23), (18, 31)]
    korean = "서울은 한국의 수도이며 가장 큰 도시입니다. " * 5
    assert all(start == 0 or korean[start - 1] == " " for start, _ in chunk_spans(korean, 60, 15))
    # Thai does not space its words, but a word is many characters: a start is after a space, or where
    # the chunk before was cut for want of one (as a long word is cut), never between two of its letters
    thai = "ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอนหรือวรรณยุกต์เช่นเดียวกับภาษาจีน " * 6
    spans = chunk_spans(thai, 60, 15)
    assert all(thai[start - 1] == " " or start == before for (_, before), (start, _) in zip(spans, spans[1:]))
