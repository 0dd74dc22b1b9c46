"""Task kinds: per kind, the Auto class that builds a model, the tiny config every family of the
kind starts from, and the CPU inputs of each phase (forward: eval outputs; backward: a loss;
generate: greedy decoding). Inputs are built from a seeded generator so both sides see the same
tensors; families override config keys in registry.py."""
import torch

SEQ = 8          # tokens per sequence
BATCH = 2
VOCAB = 128
NEW_TOKENS = 5   # greedy generate length
IMAGE = 32       # image side
AUDIO_SAMPLES = 1600

# Common keys: HF configs map most of these through attribute_map (n_embd, d_model, ...).
# Dropout keys are zeroed so the training-mode backward is deterministic on both sides.
_TEXT = dict(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    pad_token_id=0, bos_token_id=1, eos_token_id=2,
)
_NO_DROPOUT = dict(
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attention_dropout=0.0, dropout=0.0,
    hidden_dropout=0.0, activation_dropout=0.0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    classifier_dropout=0.0, dropout_rate=0.0, drop_path_rate=0.0, layerdrop=0.0,
    feat_proj_dropout=0.0, final_dropout=0.0, mask_time_prob=0.0, mask_feature_prob=0.0,
    encoder_layerdrop=0.0, decoder_layerdrop=0.0, embedding_dropout=0.0, summary_first_dropout=0.0,
    residual_dropout=0.0, ffn_dropout=0.0, emb_dropout=0.0, classifier_dropout_prob=0.0,
    hidden_dropout_rate=0.0, attention_dropout_rate=0.0, router_jitter_noise=0.0, conformer_conv_dropout=0.0,
    moe_token_dropout=0.0, qa_dropout=0.0, seq_classif_dropout=0.0, summary_last_dropout=0.0,
)
_SEQ2SEQ = dict(
    vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
)
_IMAGE = dict(
    image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=32, intermediate_size=64,
    num_hidden_layers=2, num_attention_heads=4, num_labels=3,
)
_AUDIO_CTC = dict(
    vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
    conv_dim=(16, 16), conv_kernel=(10, 3), conv_stride=(5, 2), num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2, num_feat_extract_layers=2, pad_token_id=0,
    ctc_loss_reduction="mean",
)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _ids(g, vocab=VOCAB, batch=BATCH, seq=SEQ):
    # Ids from 3 up: 0-2 are pad/bos/eos in the tiny configs.
    return torch.randint(3, vocab, (batch, seq), generator=g)


def _vocab(config):
    v = getattr(config, "vocab_size", None)
    if v is None and hasattr(config, "get_text_config"):
        v = getattr(config.get_text_config(), "vocab_size", None)
    return min(v or VOCAB, VOCAB)


class Kind:
    """A task kind. `inputs(config, phase)` returns the CPU kwargs of the model call for phase
    "forward" (no labels), "backward" (with labels: the model returns .loss) and "generate"."""
    name = ""
    auto = ""
    defaults = {}
    generative = False
    output = "logits"  # the forward output compared with CPU

    def inputs(self, config, phase):
        raise NotImplementedError


class CausalLM(Kind):
    name, auto, generative = "causal-lm", "AutoModelForCausalLM", True
    defaults = {**_TEXT, **_NO_DROPOUT}

    def inputs(self, config, phase):
        g = _gen()
        ids = _ids(g, _vocab(config))
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if phase == "backward":
            out["labels"] = ids.clone()
        return out


class MoELM(CausalLM):
    name = "moe-lm"
    defaults = {**CausalLM.defaults, "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4,
                "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}


class MaskedLM(Kind):
    name, auto = "masked-lm", "AutoModelForMaskedLM"
    defaults = {**_TEXT, **_NO_DROPOUT, "type_vocab_size": 2}

    def inputs(self, config, phase):
        g = _gen()
        ids = _ids(g, _vocab(config))
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if phase == "backward":
            labels = torch.full_like(ids, -100)
            labels[:, ::3] = ids[:, ::3]  # a few masked positions, the rest ignored
            out["labels"] = labels
        return out


class Seq2Seq(Kind):
    name, auto, generative = "seq2seq", "AutoModelForSeq2SeqLM", True
    defaults = {**_SEQ2SEQ, **_NO_DROPOUT}

    def inputs(self, config, phase):
        g = _gen()
        v = _vocab(config)
        ids = _ids(g, v)
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        labels = _ids(g, v, seq=SEQ - 2)
        if phase == "forward":
            out["decoder_input_ids"] = torch.cat([torch.ones_like(labels[:, :1]), labels[:, :-1]], 1)
        elif phase == "backward":
            out["labels"] = labels
        return out


class ImageClassification(Kind):
    name, auto = "image", "AutoModelForImageClassification"
    defaults = {**_IMAGE, **_NO_DROPOUT}

    def inputs(self, config, phase):
        g = _gen()
        c = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", IMAGE)
        size = size[0] if isinstance(size, (list, tuple)) else size
        out = {"pixel_values": torch.randn(BATCH, c, size, size, generator=g)}
        if phase == "backward":
            out["labels"] = torch.randint(0, config.num_labels, (BATCH,), generator=g)
        return out


class AudioCTC(Kind):
    name, auto = "audio-ctc", "AutoModelForCTC"
    defaults = {**_AUDIO_CTC, **_NO_DROPOUT}

    def inputs(self, config, phase):
        g = _gen()
        out = {"input_values": torch.randn(BATCH, AUDIO_SAMPLES, generator=g)}
        if phase == "backward":
            out["labels"] = torch.randint(1, config.vocab_size, (BATCH, 6), generator=g)
        return out


class SpeechSeq2Seq(Kind):
    """Whisper-style: log-mel features (batch, mel bins, 2 * max_source_positions)."""
    name, auto, generative = "speech-seq2seq", "AutoModelForSpeechSeq2Seq", True
    defaults = {**_SEQ2SEQ, **_NO_DROPOUT, "num_mel_bins": 16, "max_source_positions": 16,
                "max_target_positions": 32}

    def inputs(self, config, phase):
        g = _gen()
        out = {"input_features": torch.randn(BATCH, config.num_mel_bins, 2 * config.max_source_positions, generator=g)}
        labels = _ids(g, _vocab(config), seq=SEQ - 2)
        if phase == "forward":
            out["decoder_input_ids"] = torch.cat([torch.ones_like(labels[:, :1]), labels[:, :-1]], 1)
        elif phase == "backward":
            out["labels"] = labels
        return out


class CLIPLike(Kind):
    """Dual encoders (CLIP, SigLIP, ...): contrastive logits; backward on return_loss=True."""
    name, auto = "clip", "AutoModel"
    output = "logits_per_image"
    defaults = {}
    text = {**_TEXT, **_NO_DROPOUT, "num_key_value_heads": None, "head_dim": None}
    vision = {**_IMAGE, **_NO_DROPOUT}

    def inputs(self, config, phase):
        g = _gen()
        tc = config.text_config
        ids = _ids(g, _vocab(tc))
        size = config.vision_config.image_size
        out = {"input_ids": ids, "pixel_values": torch.randn(BATCH, 3, size, size, generator=g)}
        if phase == "backward":
            out["return_loss"] = True
        return out


KINDS = {k.name: k() for k in (CausalLM, MoELM, MaskedLM, Seq2Seq, ImageClassification, AudioCTC,
                               SpeechSeq2Seq, CLIPLike)}
