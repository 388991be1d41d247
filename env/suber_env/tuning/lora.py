"""LoRA tuning of a causal LM as a rater (peft), on examples from the dataset's history (``examples.py``).

The prompt of an example is the one the transformers rater builds (its shared prefix and the request's suffix,
the very token ids it rates with); the loss is on the answer position only: the cross-entropy of the target
label among the scale's label tokens, read the way the rater reads them (softmax restricted to those tokens,
every spelling of a label summed). Each round of ``eval_every`` steps ends with the validation loss: the best
adapter is kept, and tuning stops after ``patience`` rounds without improvement. A checkpoint (adapter,
optimiser, position) is written atomically after each round, so ``resume`` continues where a run stopped. At the
end the best adapter is merged into the model, saved with its tokenizer as a plain transformers folder: the
transformers rater loads it as any model (``--rater transformers --model OUT``).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..raters.transformers_rater import TransformersRater, left_padded
from .examples import history_examples

CHECKPOINT, BEST, CONFIG = "checkpoint", "best", "tuning.json"


@dataclass
class TuneConfig:
    rank: int = 8
    alpha: int = 16
    target_modules: str = "all-linear"  # every linear layer of the blocks (not the output head)
    lr: float = 5e-4
    batch: int = 8
    epochs: int = 2
    max_examples: int = 2000  # training examples drawn from the history's training cut
    max_validation: int = 200
    validation: float = 0.1  # each user's latest share of history ratings: the validation cut
    eval_every: int = 50  # optimiser steps per round
    patience: int = 3
    k: int = 3  # past items the prompt shows (the env's default retrieval)
    shots: int = 2  # the rater's worked examples (the env's default prompt)
    seed: int = 0


class TuneError(ValueError):
    """A one-line reason tune-rater cannot run."""


class LabelLoss:
    """Cross-entropy of the target label among the rater's label tokens at each row's answer position."""

    def __init__(self, rater: TransformersRater, device):
        import torch

        if rater.doubles:
            raise TuneError(
                f"rating scale {rater.scale.name!r}: some labels are two tokens for this tokenizer; tune on a scale "
                "whose labels are single tokens (--scale 0-9 or 1-5)"
            )
        self.torch, self.device = torch, device
        self.token_ids = rater.token_ids.to(device)
        mask = torch.zeros(len(rater.token_ids), rater.scale.n, device=device)
        mask[torch.arange(len(rater.token_ids)), rater.label_idx.to(device)] = 1.0
        self.log_mask = torch.log(mask)  # (tokens, labels): 0 where a token spells the label, -inf elsewhere
        self.pad_id = rater.pad_id

    def label_logp(self, model, seqs: list[list[int]]):
        """(B, labels) log-probabilities; rows left-padded, positions counted from each row's first token."""
        torch = self.torch
        ids, mask, pos = left_padded(torch, seqs, self.pad_id, self.device)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[:, -1]
        logp = torch.log_softmax(logits.float()[:, self.token_ids], dim=-1)
        return torch.logsumexp(logp[:, :, None] + self.log_mask[None], dim=1)

    def __call__(self, model, seqs, labels):
        lp = self.label_logp(model, seqs)
        target = self.torch.as_tensor(labels, device=self.device)
        return -lp[self.torch.arange(len(seqs), device=self.device), target].mean()


def _atomic_dir(final: Path, write) -> None:
    """``write(tmp)`` fills a temporary folder that then replaces ``final`` (a reader sees whole folders only)."""
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    old = final.with_name(final.name + ".old")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


class Tuner:
    """One tuning run of ``model`` (a transformers causal LM) into ``out``."""

    def __init__(self, ds, model, tokenizer, out: Path, cfg: TuneConfig, device: str | None = None):
        import torch
        from peft import LoraConfig, get_peft_model

        self.torch, self.cfg, self.out, self.tok = torch, cfg, Path(out), tokenizer
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = model.to(self.device)
        rater = TransformersRater(ds, model, tokenizer, shots=cfg.shots)
        self.loss = LabelLoss(rater, self.device)
        train, val = history_examples(ds, rater.scale, cfg.k, cfg.validation)
        if len(train) == 0 or len(val) == 0:
            raise TuneError(f"{ds.path / 'user_ratings.parquet'}: too few history ratings to tune on (need a training"
                            " and a validation cut); build the population with a longer --min-history")  # fmt: skip
        rng = np.random.default_rng(cfg.seed)
        self.train = train.subset(np.sort(rng.permutation(len(train))[: cfg.max_examples]))
        self.val = val.subset(np.sort(rng.permutation(len(val))[: cfg.max_validation]))
        self.train_ids = [rater.prefix_ids + s for s in rater.encode(self.train.requests)]
        self.val_ids = [rater.prefix_ids + s for s in rater.encode(self.val.requests)]
        lora = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, target_modules=cfg.target_modules, lora_dropout=0.0)
        torch.manual_seed(cfg.seed)  # the adapter's initial weights: a run is a function of its settings
        self.model = get_peft_model(model, lora)
        self.opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=cfg.lr)
        self.state = {"step": 0, "best": float("inf"), "bad_rounds": 0, "history": [], "done": False}

    # -- checkpoints
    def save_checkpoint(self) -> None:
        def write(tmp: Path) -> None:
            self.model.save_pretrained(tmp)
            self.torch.save(self.opt.state_dict(), tmp / "optimizer.pt")
            (tmp / "state.json").write_text(json.dumps(self.state))

        _atomic_dir(self.out / CHECKPOINT, write)

    def resume(self) -> None:
        """Continue from ``out/checkpoint`` (refused when there is none, or it was made with other settings)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        ck = self.out / CHECKPOINT
        if not (ck / "state.json").exists():
            raise TuneError(f"{ck}: no checkpoint to resume from; run without --resume")
        saved = json.loads((self.out / CONFIG).read_text()).get("config") if (self.out / CONFIG).exists() else None
        if saved is not None and saved != asdict(self.cfg):
            raise TuneError(f"{self.out / CONFIG}: the checkpoint was tuned with other settings; pass the same ones")
        set_peft_model_state_dict(self.model, load_file(ck / "adapter_model.safetensors"))
        self.opt.load_state_dict(self.torch.load(ck / "optimizer.pt", map_location=self.device))
        self.state = json.loads((ck / "state.json").read_text())

    # -- the loop
    def validation_loss(self) -> float:
        torch, b = self.torch, self.cfg.batch
        self.model.eval()
        total = 0.0
        with torch.inference_mode():
            for s in range(0, len(self.val_ids), b):
                seqs, labels = self.val_ids[s : s + b], self.val.labels[s : s + b]
                total += float(self.loss(self.model, seqs, labels)) * len(seqs)
        self.model.train()
        return total / len(self.val_ids)

    def order(self) -> np.ndarray:
        """Example indices of every step, epoch after epoch (a pure function of the seed: resume finds its place)."""
        rng = np.random.default_rng([self.cfg.seed, 1])
        return np.concatenate([rng.permutation(len(self.train_ids)) for _ in range(self.cfg.epochs)])

    def run(self, progress=None) -> dict:
        """Tune until the epochs are done or the validation loss stops improving; returns the state."""
        cfg, order = self.cfg, self.order()
        steps = (len(order) + cfg.batch - 1) // cfg.batch
        self.model.train()
        while not self.state["done"] and self.state["step"] < steps:
            s = self.state["step"]
            idx = order[s * cfg.batch : (s + 1) * cfg.batch]
            loss = self.loss(self.model, [self.train_ids[i] for i in idx], self.train.labels[idx])
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            self.state["step"] = s + 1
            if progress:
                progress(len(idx), loss.item())
            if self.state["step"] % cfg.eval_every == 0 or self.state["step"] == steps:
                self.end_round()
        self.state["done"] = True
        return self.state

    def end_round(self) -> None:
        val = self.validation_loss()
        st = self.state
        st["history"].append({"step": st["step"], "validation_loss": val})
        if val < st["best"]:
            st["best"], st["bad_rounds"] = val, 0
            _atomic_dir(self.out / BEST, self.model.save_pretrained)
        else:
            st["bad_rounds"] += 1
            st["done"] = st["bad_rounds"] >= self.cfg.patience  # early stop
        self.save_checkpoint()

    def finish(self) -> Path:
        """Merge the best adapter into the model and save it with the tokenizer in ``out`` (a transformers folder)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        if (self.out / BEST / "adapter_model.safetensors").exists():
            set_peft_model_state_dict(self.model, load_file(self.out / BEST / "adapter_model.safetensors"))
        merged = self.model.merge_and_unload()
        # a GGUF base was dequantised on load (float weights in memory), but transformers still marks it quantized
        # and refuses to save it: it is saved as the plain float model it now is
        merged.hf_quantizer = None
        if hasattr(merged.config, "quantization_config"):
            del merged.config.quantization_config
        tmp = self.out / "final.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        merged.save_pretrained(tmp)
        self.tok.save_pretrained(tmp)
        for f in tmp.iterdir():  # file by file into out, each replaced whole
            os.replace(f, self.out / f.name)
        tmp.rmdir()
        return self.out

    def write_config(self, meta: dict) -> None:
        record = {"config": asdict(self.cfg), **meta, "examples": len(self.train_ids), "validation": len(self.val_ids)}
        record["state"] = self.state
        tmp = self.out / (CONFIG + ".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, self.out / CONFIG)
