import functools
import gzip
import http.server
import threading

import pytest

from aiayn.data import multi30k
from aiayn.data.readers import DataError


def test_reads_every_split_and_language_from_the_data_dir(data_dir):
    sizes = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000, "test_2017_flickr": 1_000}
    for split, size in sizes.items():
        for src, tgt in (("en", "de"), ("de", "en"), ("en", "fr"), ("fr", "de")):
            assert len(multi30k.load(split, src, tgt)) == size
        if split != "test_2017_flickr":
            assert len(multi30k.load(split, "cs", "en")) == size


def test_the_languages_are_multi_way_parallel(data_dir):
    """Line n of every language is one caption: en-de and en-cs share their English side."""
    assert multi30k.load("val", "en", "de").source == multi30k.load("val", "en", "cs").source
    assert multi30k.load("val", "de", "cs").source == multi30k.load("val", "en", "de").target


def test_downloads_missing_files_into_the_cache(tmp_path, monkeypatch):
    served = tmp_path / "server"
    served.mkdir()
    (served / "val.en.gz").write_bytes(gzip.compress(b"A dog runs.\nTwo cats.\n"))
    (served / "val.de.gz").write_bytes(gzip.compress(b"Ein Hund rennt.\nZwei Katzen.\n"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("AIAYN_DATA_DIR", raising=False)
        monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("AIAYN_MULTI30K_URL", f"http://127.0.0.1:{server.server_address[1]}")
        corpus = multi30k.load("val", "en", "de")
        assert corpus.source == ["A dog runs.", "Two cats."] and corpus.target[0] == "Ein Hund rennt."
        assert (tmp_path / "cache" / "multi30k" / "val.de.gz").exists()
        (served / "val.en.gz").unlink()  # cached now: no second download
        assert multi30k.load("val", "en", "de").source == corpus.source
        with pytest.raises(DataError, match="downloading .*test_2016_flickr.en.gz failed"):
            multi30k.load("test_2016_flickr", "en", "de")
        assert not list((tmp_path / "cache" / "multi30k").glob(".*"))  # no partial file left
    finally:
        server.shutdown()


def test_unknown_split_or_language_is_an_error():
    with pytest.raises(DataError, match="no split 'test'"):
        multi30k.path("test", "en")
    with pytest.raises(DataError, match="no language 'ja'"):
        multi30k.path("train", "ja")
    with pytest.raises(DataError, match="no test_2017_flickr in 'cs'; cs has train, val, test_2016_flickr"):
        multi30k.path("test_2017_flickr", "cs")


def test_offline_error_names_every_file_every_place_and_the_way_to_own_data(tmp_path, monkeypatch):
    """Problem 9: offline, the error named one file, not the others, the cache, nor --train PREFIX."""
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AIAYN_MULTI30K_URL", "http://127.0.0.1:9/nothing")  # the discard port: refused
    with pytest.raises(DataError) as e:
        multi30k.load("train", "en", "de")
    message = str(e.value)
    for part in ("train.de.gz and train.en.gz", str(tmp_path / "data" / "multi30k"),
                 str(tmp_path / "cache" / "multi30k"), "export AIAYN_DATA_DIR=DIR", "--train PREFIX"):
        assert part in message, part
