"""The training benchmark compares like with like: with the same weights (dropout off), aiayn's
training step and the benchmark's reference (embeddings + torch.nn.Transformer + tied output)
give the same loss and the same updated weights in float32. So aiayn's faster path computes the
plain reference's step, not something cheaper."""

import sys
from pathlib import Path

import torch
from torch import nn

from aiayn.config import TrainConfig, model_config
from aiayn.data.batching import collate, tokenize
from aiayn.data.corpora import load_corpus
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer
from aiayn.train.optim import make_optimizer
from aiayn.train.step import Criterion, train_step

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from train_speed import Reference, reference_step  # noqa: E402


def load_into_reference(ours: Transformer, reference: Reference) -> None:
    """Copy aiayn's weights into the reference; its stacks' final LayerNorms (which the paper's
    post-norm model does not have) become identities."""
    ref = reference.transformer
    pairs = [(reference.embed, ours.src_embed)]
    for theirs, mine in zip(ref.encoder.layers, ours.encoder.layers, strict=True):
        pairs += [(theirs.self_attn.out_proj, mine.self_attn.out_proj),
                  (theirs.linear1, mine.feed_forward.w1), (theirs.linear2, mine.feed_forward.w2),
                  (theirs.norm1, mine.self_attn_res.norm), (theirs.norm2, mine.feed_forward_res.norm)]
        theirs.self_attn.in_proj_weight.data.copy_(mine.self_attn.in_proj.weight)  # both [W^Q; W^K; W^V]
        theirs.self_attn.in_proj_bias.data.copy_(mine.self_attn.in_proj.bias)
    for theirs, mine in zip(ref.decoder.layers, ours.decoder.layers, strict=True):
        pairs += [(theirs.self_attn.out_proj, mine.self_attn.out_proj),
                  (theirs.multihead_attn.out_proj, mine.cross_attn.out_proj),
                  (theirs.linear1, mine.feed_forward.w1), (theirs.linear2, mine.feed_forward.w2),
                  (theirs.norm1, mine.self_attn_res.norm), (theirs.norm2, mine.cross_attn_res.norm),
                  (theirs.norm3, mine.feed_forward_res.norm)]
        for attn, my_attn in ((theirs.self_attn, mine.self_attn), (theirs.multihead_attn, mine.cross_attn)):
            attn.in_proj_weight.data.copy_(my_attn.in_proj.weight)
            attn.in_proj_bias.data.copy_(my_attn.in_proj.bias)
    for theirs, mine in pairs:
        theirs.load_state_dict(mine.state_dict())
    ref.encoder.norm, ref.decoder.norm = nn.Identity(), nn.Identity()


def test_training_step_equals_the_torch_nn_transformer_reference_step():
    corpus = load_corpus("synthetic:copy", "", "")
    tokenizer = Tokenizer.train(corpus.source + corpus.target, 512)
    tokenized = tokenize(corpus, tokenizer, 100)
    order = [list(range(0, 16)), list(range(16, 32))]  # consecutive sentences: mixed lengths, padding
    batches = [collate(b, tokenized, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id) for b in order]
    assert any((b.src == tokenizer.pad_id).any() for b in batches)  # padding masks are exercised

    config = model_config("tiny", vocab_size=tokenizer.vocab_size, dropout=0.0, attention_dropout=0.0,
                          activation_dropout=0.0)
    torch.manual_seed(0)
    ours, reference = Transformer(config), Reference(config)
    load_into_reference(ours, reference)
    train_config = TrainConfig(label_smoothing=0.1)
    our_opt, ref_opt = make_optimizer(ours, train_config), make_optimizer(reference, train_config)
    for group in ref_opt.param_groups:
        group["lr"] = 1e-3

    initial_embedding = ours.src_embed.weight.detach().clone()
    with torch.no_grad():
        b = batches[0]
        assert torch.allclose(ours(b.src, b.tgt_in), reference(b.src, b.tgt_in), atol=1e-5)
    for b in batches:  # two updates: Adam's state must agree too
        stats = train_step(Criterion(ours, 0.1, config.pad_id), [b], our_opt, 1e-3, train_config,
                           torch.device("cpu"))
        expected = reference_step(reference, b, ref_opt)
        assert abs(stats["loss"] - expected.item()) < 1e-5
    reference_weights = dict(reference.named_parameters())
    checks = [(ours.src_embed.weight, reference_weights["embed.weight"]),
              (ours.decoder.layers[1].cross_attn.in_proj.weight,
               reference_weights["transformer.decoder.layers.1.multihead_attn.in_proj_weight"]),
              (ours.encoder.layers[0].feed_forward.w1.weight,
               reference_weights["transformer.encoder.layers.0.linear1.weight"])]
    assert not torch.allclose(ours.src_embed.weight, initial_embedding, atol=1e-5)  # the updates moved it
    for mine, theirs in checks:
        assert torch.allclose(mine, theirs, atol=1e-5), (mine - theirs).abs().max()
