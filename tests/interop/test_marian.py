"""Parity with HuggingFace MarianMTModel, an implementation nobody here wrote. No downloads:
models are built locally from small configurations."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from aiayn import checkpoint  # noqa: E402
from aiayn.cli import main  # noqa: E402
from aiayn.data.batching import pad  # noqa: E402
from aiayn.decoding import beam_search, greedy_search, max_output_lengths  # noqa: E402
from aiayn.interop.marian import (  # noqa: E402
    concatenated_layout,
    from_marian,
    load_marian,
    save_marian,
    to_marian,
)
from tests.conftest import random_ids, tiny_model  # noqa: E402

PAD, EOS = 59, 0  # Marian's convention: eos 0, padding last, the decoder starts from padding

VARIANTS = {
    "opus-mt-like": dict(activation_function="swish", scale_embedding=True),
    "gelu-unscaled": dict(activation_function="gelu", scale_embedding=False),
    "relu-separate": dict(activation_function="relu", scale_embedding=True,
                          share_encoder_decoder_embeddings=False, tie_word_embeddings=False),
}


def marian_dir(tmp_path, **options):
    """A random MarianMTModel saved with save_pretrained, with a random final logits bias."""
    torch.manual_seed(0)
    settings = dict(vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, pad_token_id=PAD,
                    eos_token_id=EOS, decoder_start_token_id=PAD, init_std=0.3)
    config = transformers.MarianConfig(**{**settings, **options})
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_()
    model.save_pretrained(tmp_path)
    return transformers.MarianMTModel.from_pretrained(tmp_path).eval()


def padded_batch(pad=PAD, vocab=59, low=1):
    g = torch.Generator().manual_seed(3)
    src = torch.randint(low, vocab, (4, 9), generator=g)
    for row, length in enumerate((9, 6, 3, 7)):
        src[row, length:] = pad
    tgt = torch.randint(low, vocab, (4, 5), generator=g)
    return src, tgt


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_marian_to_aiayn_matches_encoder_outputs_and_logits(tmp_path, variant):
    ours = from_marian(hf := marian_dir(tmp_path, **VARIANTS[variant]))
    src, tgt = padded_batch()
    tgt[:, 0] = PAD  # decoder start
    real = src != PAD
    with torch.no_grad():
        theirs_memory = hf.model.encoder(input_ids=src, attention_mask=real.long()).last_hidden_state
        theirs_logits = hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
        assert torch.allclose(ours.encode(src)[real], theirs_memory[real], atol=1e-4)
        assert torch.allclose(ours(src, tgt), theirs_logits, atol=1e-4)


def test_aiayn_to_marian_round_trip_through_save_pretrained(tmp_path):
    ours = tiny_model(output_bias=True)  # the paper's interleaved sinusoids
    with torch.no_grad():
        ours.output_proj.bias.normal_()
    to_marian(ours).save_pretrained(tmp_path)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path).eval()
    src, tgt = padded_batch(pad=0, vocab=50, low=4)
    tgt[:, 0] = 2  # aiayn's bos starts the decoder
    real = src != 0
    perm = torch.cat([torch.arange(0, 64, 2), torch.arange(1, 64, 2)])
    with torch.no_grad():
        theirs_memory = hf.model.encoder(input_ids=src, attention_mask=real.long()).last_hidden_state
        # Marian's hidden states are ours with the d_model axis permuted; the logits are the same.
        assert torch.allclose(ours.encode(src)[..., perm][real], theirs_memory[real], atol=1e-4)
        theirs_logits = hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
        assert torch.allclose(ours(src, tgt), theirs_logits, atol=1e-4)


def test_the_layout_permutation_preserves_the_logits_exactly():
    ours = tiny_model()
    permuted = tiny_model(pe_layout="concatenated")
    permuted.load_state_dict(concatenated_layout(ours.state_dict(), 64))
    src, tgt = random_ids(2, 6), random_ids(2, 5, seed=1)
    assert torch.allclose(permuted(src, tgt), ours(src, tgt), atol=1e-5)


CAP = 39  # most output tokens; HuggingFace's max_new_tokens = CAP + 1 forces eos after CAP tokens


def generate(hf, src, pad, **settings):
    """HuggingFace's outputs as token lists without the decoder start and eos."""
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=(src != pad).long(), do_sample=False,
                          max_new_tokens=CAP + 1, **settings)
    rows = []
    for row in out[:, 1:].tolist():
        row = row[: row.index(hf.config.eos_token_id)] if hf.config.eos_token_id in row else row
        rows.append([t for t in row if t != pad])
    return rows


@pytest.fixture(scope="module")
def exported(reverse_model, tmp_path_factory):
    """The trained reverse model saved as a Marian directory, and 100 padded source sentences."""
    model, tokenizer, sources = reverse_model
    out = save_marian(model, tokenizer, tmp_path_factory.mktemp("marian"), "xx", "yy")
    return out, pad([ids + [tokenizer.eos_id] for ids in tokenizer.encode(sources[:100])], tokenizer.pad_id)


@pytest.mark.parametrize("direction", ["aiayn", "from-marian"])
def test_greedy_and_beam_outputs_equal_generate_token_for_token(exported, reverse_model, direction):
    out, src = exported
    hf = transformers.MarianMTModel.from_pretrained(out).eval()
    ours = reverse_model[0] if direction == "aiayn" else load_marian(out)[0]
    c = ours.config
    never, limits = [[c.pad_id], [c.bos_id]], max_output_lengths(src, c.pad_id, fixed=CAP)
    greedy = generate(hf, src, c.pad_id, num_beams=1, bad_words_ids=never)
    assert [h.tokens for h in greedy_search(ours, src, limits)] == greedy
    assert sum(map(len, greedy)) > 500  # real outputs, not empty ones
    for alpha in (0.0, 0.6, 1.0):
        theirs = generate(hf, src, c.pad_id, num_beams=4, length_penalty=alpha, early_stopping=True,
                          bad_words_ids=never)
        mine = [h[0].tokens for h in beam_search(ours, src, 4, 1, alpha, "plain", limits)]
        # The one deliberate difference: a hypothesis cut at the cap ends with a forced eos that
        # HuggingFace scores as log-probability 0 and aiayn as the model's eos log-probability.
        capped = {i for i in range(len(src)) if CAP in (len(mine[i]), len(theirs[i]))}
        assert len(capped) <= 5, alpha
        assert [m for i, m in enumerate(mine) if i not in capped] == \
            [t for i, t in enumerate(theirs) if i not in capped], alpha


def test_tokenizer_matches_huggingface_marian_tokenizer(exported, reverse_model):
    out, _ = exported
    theirs = transformers.MarianTokenizer.from_pretrained(out)
    _, ours, languages = load_marian(out)
    sentences = reverse_model[2][:50] + ["a b c", "z"]
    for sentence, ids in zip(sentences, ours.encode(sentences), strict=True):
        assert theirs(sentence).input_ids == ids + [ours.eos_id]
        assert theirs.decode(ids, skip_special_tokens=True) == ours.decode(ids)
    assert languages == {"source_lang": "xx", "target_lang": "yy"}


def test_aiayn_translate_uses_a_marian_directory_directly(exported, reverse_model, capsys):
    out, _ = exported
    assert checkpoint.resolve(out) == out
    sentence = reverse_model[2][0]
    assert main(["translate", str(out), sentence, "--beam-size", "1"]) == 0
    from_dir = capsys.readouterr().out.strip()
    model, tokenizer, _ = reverse_model
    src = torch.tensor([tokenizer.encode([sentence])[0] + [tokenizer.eos_id]])
    expected = tokenizer.decode(greedy_search(model, src)[0].tokens)
    assert from_dir == expected


def test_convert_commands_round_trip(exported, reverse_model, tmp_path):
    out, src = exported
    assert main(["convert", "from-marian", str(out), str(tmp_path / "ck")]) == 0
    assert main(["convert", "to-marian", str(tmp_path / "ck"), str(tmp_path / "marian")]) == 0
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "marian").eval()
    model = reverse_model[0]
    tgt = torch.full((100, 1), model.config.bos_id)
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt).logits
        assert torch.allclose(model(src, tgt), theirs, atol=1e-4)


def test_separate_vocabularies_round_trip_through_marian(separate_model, tmp_path):
    model, tokenizer, sources = separate_model
    assert tokenizer.source_vocab_size != tokenizer.vocab_size  # the sides cannot be mixed up unnoticed
    out = save_marian(model, tokenizer, tmp_path / "marian", "xx", "yy")
    hf = transformers.MarianMTModel.from_pretrained(out).eval()
    assert (hf.config.vocab_size, hf.config.decoder_vocab_size) == (tokenizer.source_vocab_size,
                                                                   tokenizer.vocab_size)
    theirs_tokenizer = transformers.MarianTokenizer.from_pretrained(out)
    assert theirs_tokenizer.separate_vocabs
    lines = sources[:50]
    src = pad([ids + [tokenizer.eos_id] for ids in tokenizer.encode(lines)], tokenizer.pad_id)
    assert theirs_tokenizer(lines, padding=True, return_tensors="pt").input_ids.tolist() == src.tolist()
    c = model.config
    limits = max_output_lengths(src, c.pad_id, fixed=CAP)
    ours = [h.tokens for h in greedy_search(model, src, limits)]
    assert generate(hf, src, c.pad_id, num_beams=1, bad_words_ids=[[c.pad_id], [c.bos_id]]) == ours
    outputs = [tokenizer.decode(t) for t in ours]
    assert [theirs_tokenizer.decode(t, skip_special_tokens=True) for t in ours] == outputs
    assert [ids[:-1] for ids in theirs_tokenizer(text_target=outputs).input_ids] == \
        tokenizer.encode(outputs, "target")
    back, back_tokenizer, _ = load_marian(out)
    assert back.config.vocabulary == "separate" and back_tokenizer.separate
    assert back_tokenizer.encode(lines) == tokenizer.encode(lines)
    assert back_tokenizer.pieces(ours[0]) == tokenizer.pieces(ours[0])
    assert [h.tokens for h in greedy_search(back, src, limits)] == ours


def test_what_marian_cannot_represent_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Marian has no pre-norm layers"):
        to_marian(tiny_model(norm_position="pre"))
    with pytest.raises(ValueError, match="Marian has no learned positions"):
        to_marian(tiny_model(positional="learned"))
    with pytest.raises(ValueError, match="Marian has no relative positions"):
        to_marian(tiny_model(relative_positions=4))
    hf = marian_dir(tmp_path, decoder_attention_heads=2)
    with pytest.raises(ValueError, match="attention_heads: encoder 4 != decoder 2"):
        from_marian(hf)
