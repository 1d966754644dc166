"""How a model translates (`DecodeConfig`: the search, batches, sentences) and how `aiayn serve`
serves it (`ServeConfig`: listening, batching, limits).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiayn.config.fields import ConfigError, _check_fields, _opt


@dataclass(frozen=True)
class DecodeConfig:
    """How to translate: the search (section 6.1: beam 4, length penalty 0.6, input length + 50),
    batches, and how a text is cut into the sentences a model translates."""

    beam_size: int = _opt(4, "beam width; 1 is greedy decoding", bounds=">= 1")
    nbest: int = _opt(1, "hypotheses to output per sentence, best first (at most the beam size)",
                     bounds=">= 1")
    length_penalty: float = _opt(0.6, "length penalty alpha; 0 turns it off", bounds=">= 0")
    penalty_form: str = _opt(
        "gnmt", "gnmt: ((5 + |Y|) / 6)^alpha (the paper); plain: |Y|^alpha (fairseq, Marian, HuggingFace)",
        ("gnmt", "plain"),
    )
    max_output_extra: int = _opt(50, "output at most the source length + this many tokens (the paper's rule)",
                                bounds=">= 0")
    max_output_len: int = _opt(0, "output at most this many tokens instead; 0: use --max-output-extra",
                              bounds=">= 0")
    alternatives: int = _opt(
        0, "the N most likely ways to go on at the first position after a prefix (--prefix; or at the "
           "first position), each completed by the search, best first (CTranslate2's return_alternatives); "
           "0: none", bounds=">= 0", metavar="N")
    decoder_start: int = _opt(-1, "the decoder's first token: a multilingual model's target language "
                                  "(language_token target); -1: <s>", flag=False, bounds=">= -1")
    repetition_penalty: float = _opt(
        1.0, "against repetition loops: the score of every token a translation already holds is divided by "
             "this (multiplied where negative), so above 1 a repeated token becomes less likely "
             "(CTranslate2's and HuggingFace's repetition_penalty); 1: off", bounds="> 0")
    no_repeat_ngram_size: int = _opt(
        3, "against repetition loops: no sequence of this many tokens twice in a translation "
           "(CTranslate2's and HuggingFace's no_repeat_ngram_size; 3 removes a weak model's loops and "
           "leaves a good model's BLEU as it was); 0: off", bounds=">= 0", metavar="N")
    temperature: float = _opt(0.0, "sample with this temperature instead of searching; 0: search",
                               bounds=">= 0")
    top_k: int = _opt(0, "when sampling, only from the k most probable tokens; 0: from all", bounds=">= 0")
    batch_size: int = _opt(128, "sentences per batch, or source tokens with --batch-by tokens", bounds=">= 1")
    batch_by: str = _opt("sentences", "what --batch-size counts", ("sentences", "tokens"))
    seed: int = _opt(1, "seed for sampling")
    split: bool = _opt(
        True, "cut each text into its lines (kept exactly) and sentences, translate those, and join "
              "them back with the text's own whitespace; --no-split: each text is one sentence")
    format: str = _opt(
        "text", "what each text is: text, or html (only its text is translated; tags, attributes, "
                "comments, <script>/<style>/<code>/<pre> and translate=\"no\" elements are kept, and "
                "inline tags inside a sentence stay on the words they mark)", ("text", "html"))
    max_source_len: int = _opt(
        0, "cut a sentence of more source tokens than this at its best boundaries (never dropped or "
           "truncated); 0: the model's own limit (--max-len of its training, or its learned positions)",
        bounds=">= 0")
    compile: bool = _opt(
        False, "run each decoder step compiled by TorchInductor ahead of time: a search's steps (one for "
               "batches of 8 rows or more, one each for fewer) compile for tens of seconds once per model "
               "and machine, kept on disk for later processes ($AIAYN_CACHE_DIR, `aiayn cache`); then "
               "decoding is faster (benchmarks/detail/decode_speed.md), with the same translations up to "
               "float rounding; with --int8, on int8 matmuls (fastest on CPUs with AMX or VNNI units). "
               "--no-compile: never. Neither given: compiled if this model has been compiled on this "
               "machine before, or (aiayn translate) the --input file is long enough to repay compiling")

    def start_token(self, bos_id: int) -> int:
        """The decoder's first token: `decoder_start` when set, else the model's <s> (`bos_id`)."""
        return self.decoder_start if self.decoder_start >= 0 else bos_id

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.nbest > self.beam_size:
            raise ConfigError(f"nbest={self.nbest} must be at most beam_size={self.beam_size}")


@dataclass(frozen=True)
class ServeConfig:
    """How `aiayn serve` listens, gathers requests into batches, and what it accepts."""

    host: str = _opt("127.0.0.1", "address to listen on (0.0.0.0: every interface)", metavar="ADDR")
    port: int = _opt(8000, "TCP port to listen on", bounds="[1, 65535]")
    batching: bool = _opt(True, "gather sentences of concurrent requests into one search; "
                                "--no-batching translates one request at a time")
    workers: int = _opt(0, "searches that run at once, each on its share of --threads; 0: 2 on a CPU of "
                           "2 or more cores (small batches: more sentences per second and per CPU second "
                           "than one search on every core), else 1, and 1 with a compiled decoder step. "
                           "--no-batching: 1", bounds=">= 0")
    max_batch_tokens: int = _opt(4096, "source tokens of the sentences gathered into one search",
                                 bounds=">= 1")
    max_wait_ms: float = _opt(5.0, "how long the first sentence waits for others to share its search",
                              bounds=">= 0")
    return_wait_ms: float = _opt(30.0, "after a search, how long the next waits for the clients it answered "
                                       "to send again (a program translating sentence by sentence does at "
                                       "once); 0: not at all", bounds=">= 0")
    max_queue: int = _opt(4096, "sentences waiting at most (of requests that are not bulk: see --max-bulk); "
                                "beyond, requests get 503 and Retry-After", bounds=">= 1")
    max_bulk: int = _opt(8, "bulk requests (a file, or more source tokens than --max-batch-tokens, or more "
                            "sentences than --max-queue) translated at once at most; beyond, 503 and "
                            "Retry-After. Their sentences are searched while no other sentence waits, by all "
                            "searches but one (--workers)", bounds=">= 1")
    timeout: float = _opt(60.0, "seconds a request may take; after that it gets 504", bounds="> 0")
    file_timeout: float = _opt(600.0, "seconds a file (/translate_file) may take, all of it; after that it "
                                      "gets 504", bounds="> 0")
    max_texts: int = _opt(128, "texts in one request at most (also of /detect)", bounds=">= 1")
    max_chars: int = _opt(4000, "characters of one text at most (also of /detect); detecting a file's "
                                "language reads its first this many", bounds=">= 1")
    max_tokens: int = _opt(400, "source tokens of one text at most", bounds=">= 1")
    max_output_tokens: int = _opt(1024, "output tokens a request may ask for at most (/v1/translate's "
                                        "max_len)", bounds=">= 1")
    max_body_bytes: int = _opt(1 << 20, "bytes of a request body at most, a file's upload included (413 "
                                        "beyond)", bounds=">= 1")
    max_file_bytes: int = _opt(16 << 20, "bytes of a .docx, .pptx, .odt, .odp or .epub file unpacked at most "
                                         "(each is a zip archive)", bounds=">= 1")
    max_file_tokens: int = _opt(100_000, "source tokens of one file at most", bounds=">= 1")
    prep_threads: int = _opt(2, "threads that prepare texts and files (cutting into sentences, tokenising, "
                                "detecting languages, reading and writing files) beside the event loop and "
                                "the searches", bounds=">= 1")
    max_beam_size: int = _opt(16, "largest beam a request may ask for", bounds=">= 1")
    req_limit: int = _opt(0, "requests per minute from one client address to the translating endpoints; "
                             "beyond, 429 with Retry-After; 0: no limit", bounds=">= 0")
    key_req_limit: int = _opt(0, "requests per minute with one API key to the translating endpoints; 0: no "
                                 "limit", bounds=">= 0")
    zero_shot: bool = _opt(False, "also serve a multilingual model's directions it was not trained on, from "
                                  "a language it has read into one it has written (zero-shot: untrained "
                                  "quality)")
    drain_timeout: float = _opt(30.0, "seconds SIGTERM waits for requests in flight before exiting",
                                bounds=">= 0")

    def __post_init__(self) -> None:
        _check_fields(self)


