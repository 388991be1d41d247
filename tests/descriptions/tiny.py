"""A tiny real causal LM for constraint tests: a BPE tokenizer trained here, a 2-layer Llama with random weights."""

from __future__ import annotations

import random

_TEXT = (
    "red green blue sky comedy drama horror fantasy name age hobby job description she he is a the and of to "
    "loves films books reads garden chess paints 0 1 2 3 4 5 6 7 8 9 - : , . ! ?"
)
CORPUS_WORDS = _TEXT.split(" ")


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(CORPUS_WORDS) for _ in range(rng.randint(3, 12))) + "\n" for _ in range(n)]


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<eos>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")


def tiny_model(vocab_size: int, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=0, pad_token_id=1, bos_token_id=None,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def tiny_backend():
    from suber_data.descriptions.backends import BackendInfo
    from suber_data.descriptions.local import LocalBackend

    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer))
    return LocalBackend(BackendInfo("transformers", "tiny-random-llama", "test"), model, tokenizer, "cpu")
