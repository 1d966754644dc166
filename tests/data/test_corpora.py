import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.data.corpora import default_valid, load_corpus
from aiayn.data.readers import DataError, read_lines, read_parallel, read_tsv


def write(path, text: str | bytes, gz=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_plain_and_gzip_files_read_the_same(tmp_path):
    text = "Ein Hund.\nZwei Katzen\u2028im Garten.\r\n\n"  # U+2028 must not split a line
    plain, packed = write(tmp_path / "a.de", text), write(tmp_path / "a.de.gz", text, gz=True)
    assert read_lines(plain) == read_lines(packed) == ["Ein Hund.", "Zwei Katzen\u2028im Garten.", ""]


def test_line_count_mismatch_names_both_files_and_both_counts(tmp_path):
    src = write(tmp_path / "train.en", "a\nb\nc\n")
    tgt = write(tmp_path / "train.de", "a\nb\n")
    with pytest.raises(DataError) as e:
        read_parallel(src, tgt)
    assert f"{src} has 3 lines" in str(e.value) and f"{tgt} has 2 lines" in str(e.value)


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, gz):
    path = write(tmp_path / ("bad.en.gz" if gz else "bad.en"), b"fine\nalso fine\nbroken \xff here\n", gz=gz)
    with pytest.raises(DataError, match=rf"{path}:3: invalid UTF-8"):
        read_lines(path)


def test_missing_and_corrupt_files_are_named(tmp_path):
    with pytest.raises(DataError, match="nope.en: no such file"):
        read_lines(tmp_path / "nope.en")
    corrupt = write(tmp_path / "x.en.gz", b"not gzip at all")
    with pytest.raises(DataError, match=f"{corrupt}: cannot read"):
        read_lines(corrupt)


def test_tsv_reads_pairs_and_names_the_bad_line(tmp_path):
    good = write(tmp_path / "pairs.tsv", "a cat\teine Katze\nthe dog\tder Hund\n")
    corpus = read_tsv(good)
    assert corpus.source == ["a cat", "the dog"] and corpus.target == ["eine Katze", "der Hund"]
    bad = write(tmp_path / "bad.tsv", "a\tb\nno tab here\n")
    with pytest.raises(DataError, match=rf"{bad}:2: expected 2 tab-separated columns, found 1"):
        read_tsv(bad)


def test_spec_forms(tmp_path):
    write(tmp_path / "c.en", "hello\n")
    write(tmp_path / "c.de.gz", "hallo\n", gz=True)
    write(tmp_path / "c.tsv", "hello\thallo\n")
    for spec in (str(tmp_path / "c"), f"{tmp_path / 'c.en'},{tmp_path / 'c.de.gz'}", str(tmp_path / "c.tsv")):
        corpus = load_corpus(spec, "en", "de")
        assert (corpus.source, corpus.target) == (["hello"], ["hallo"]), spec
    with pytest.raises(DataError, match=r"c\.fr: no such file"):
        load_corpus(str(tmp_path / "c"), "en", "fr")


def test_synthetic_tasks_need_no_data_and_are_deterministic():
    copy, again = load_corpus("synthetic:copy", "", ""), load_corpus("synthetic:copy", "", "")
    assert copy.source == again.source and copy.source == copy.target and len(copy) == 20_000
    reverse = load_corpus("synthetic:reverse:val", "", "")
    assert all(t.split() == s.split()[::-1] for s, t in zip(reverse.source, reverse.target, strict=True))
    with pytest.raises(DataError, match="unknown synthetic task"):
        load_corpus("synthetic:sort", "", "")


def test_default_validation_sets():
    assert default_valid("multi30k") == "multi30k:val"
    assert default_valid("synthetic:reverse") == "synthetic:reverse:val"
    assert default_valid("corpus.tsv") == ""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300), st.binary(max_size=300), st.sampled_from(["plain", "gz", "tsv", "tsv.gz"]))
def test_property_any_bytes_give_pairs_or_a_data_error(tmp_path_factory, src, tgt, form):
    root = tmp_path_factory.mktemp("bytes")
    if form.startswith("tsv"):
        spec = str(write(root / f"pairs.{form}", src + b"\n" + tgt, gz=form.endswith("gz")))
    else:
        gz = form == "gz"
        suffix = ".gz" if gz else ""
        write(root / f"c.en{suffix}", src, gz=gz)
        write(root / f"c.de{suffix}", tgt, gz=gz)
        spec = str(root / "c")
    try:
        corpus = load_corpus(spec, "en", "de")
    except DataError as e:
        assert str(root) in str(e)
        return
    assert len(corpus.source) == len(corpus.target)
    assert all("\n" not in line and not line.endswith("\r") for line in corpus.source + corpus.target)


def test_gzip_cut_short_is_a_data_error_naming_the_file(tmp_path):
    path = write(tmp_path / "cut.en.gz", gzip.compress(b"a line\n" * 1000)[:-20])
    with pytest.raises(DataError, match=f"{path}: cannot read"):
        read_lines(path)


@pytest.mark.parametrize("src_lines, tgt_lines", [(3, 5), (5, 3)])
def test_streamed_parallel_files_of_different_lengths_fail_with_both_counts(tmp_path, src_lines, tgt_lines):
    from aiayn.data.corpora import iter_pairs

    (tmp_path / "t.en").write_text("a\n" * src_lines)
    (tmp_path / "t.de").write_text("b\n" * tgt_lines)
    pairs = iter_pairs(str(tmp_path / "t"), "en", "de")
    assert [next(pairs) for _ in range(3)] == [("a", "b")] * 3  # read as needed
    with pytest.raises(DataError, match=f"t.en has {src_lines} lines, .*t.de has {tgt_lines} lines"):
        list(pairs)


def test_streamed_pairs_are_those_loaded_whole(tmp_path):
    from aiayn.data.corpora import iter_pairs

    (tmp_path / "t.tsv").write_text("a b\tx y\nc\tz\n")
    corpus = load_corpus(str(tmp_path / "t.tsv"), "en", "de")
    assert list(iter_pairs(str(tmp_path / "t.tsv"), "en", "de")) == [("a b", "x y"), ("c", "z")]
    assert (corpus.source, corpus.target) == (["a b", "c"], ["x y", "z"])
    named = load_corpus("synthetic:copy", "", "")
    assert list(iter_pairs("synthetic:copy", "", "")) == list(zip(named.source, named.target, strict=True))


def test_a_sample_of_pairs_is_all_of_them_in_order_when_few_else_k_of_them_by_seed():
    from aiayn.data.corpora import sample_pairs

    pairs = [(str(i), str(-i)) for i in range(100)]
    assert sample_pairs(iter(pairs), 100) == (pairs, 100)
    sample, seen = sample_pairs(iter(pairs), 10, seed=3)
    assert seen == 100 and len(sample) == 10 and set(sample) <= set(pairs)
    assert sample == sample_pairs(iter(pairs), 10, seed=3)[0] != sample_pairs(iter(pairs), 10, seed=4)[0]
    late = sum(int(s) >= 50 for k in range(200) for s, _ in sample_pairs(iter(pairs), 10, seed=k)[0])
    assert 800 < late < 1200  # the second half of the stream is as likely to be kept as the first
