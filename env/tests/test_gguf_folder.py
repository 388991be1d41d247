"""A GGUF model read through its converted folder (suber_env.raters.gguf_folder) is the model transformers reads
from the GGUF file itself: the same token ids, chat template and logits; converted once, then reused."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env_testdata import SMOLLM2_GGUF, smollm2_dir

pytestmark = pytest.mark.slow


def test_the_converted_folder_is_the_gguf_model_and_is_written_once(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    import torch
    from suber_env.raters.gguf_folder import gguf_as_folder
    from suber_env.raters.transformers_rater import load_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("SUBER_MODEL_CACHE", str(tmp_path / "models"))
    model, tok = load_model(str(smollm2_dir()), SMOLLM2_GGUF)
    folder = gguf_as_folder(smollm2_dir(), SMOLLM2_GGUF)
    assert folder.parent == tmp_path / "models" and (folder / "config.json").exists()
    assert not list(folder.parent.glob(".converting-*"))  # no staging folder left behind
    written = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert gguf_as_folder(smollm2_dir(), SMOLLM2_GGUF) == folder  # reused, not rewritten
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == written
    # suber_data's copy (the env imports no suber_data) names the same folder, so the two share the conversion
    data_copy = pytest.importorskip("suber_data.descriptions.gguf_folder")
    assert data_copy.gguf_as_folder(smollm2_dir(), SMOLLM2_GGUF) == folder

    direct_tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
    direct = AutoModelForCausalLM.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    chat = [{"role": "user", "content": "Rate Heat (1995) from 1 to 10 for Ana, who loves crime films."}]
    text = direct_tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == text
    ids = direct_tok(text, return_tensors="pt")["input_ids"]
    assert tok(text, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
    assert (tok.eos_token_id, tok.pad_token_id, len(tok)) == (
        direct_tok.eos_token_id,
        direct_tok.pad_token_id,
        len(direct_tok),
    )
    with torch.no_grad():
        np.testing.assert_array_equal(model(ids).logits.numpy(), direct(ids).logits.numpy())


def test_a_file_not_on_this_machine_is_left_to_transformers(tmp_path):
    from suber_env.raters.gguf_folder import gguf_as_folder

    assert gguf_as_folder("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "model.gguf") is None
    assert gguf_as_folder(tmp_path, "missing.gguf") is None
