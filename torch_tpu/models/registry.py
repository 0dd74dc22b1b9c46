"""The model families: one row each (name, task kind, config overrides on top of the kind's tiny
defaults). A family is a transformers model_type; its model is built from a tiny config on CPU
(no hub access). `FAST` is the CI subset; `ANNOUNCED` the families the TorchTPU announcement
names (Qwen, DeepSeek, Gemma, Llama, Mistral, Whisper, CLIP, ViT, ResNet, BERT, T5)."""
import dataclasses

from torch_tpu.models.kinds import KINDS


DROP = object()  # an override value that removes a default key (e.g. a read-only property)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str                # the transformers model_type
    kind: str                # a key of kinds.KINDS
    overrides: dict = dataclasses.field(default_factory=dict)
    auto: str = ""           # Auto class, when not the kind's

    def build_config(self):
        from transformers import AutoConfig

        k = KINDS[self.kind]
        if self.kind == "clip":
            return _clip_config(self)
        kw = {**k.defaults, **self.overrides}
        return AutoConfig.for_model(self.name, **{key: v for key, v in kw.items() if v is not DROP})

    def build_model(self, config):
        import transformers

        return getattr(transformers, self.auto or KINDS[self.kind].auto).from_config(config)


def _clip_config(fam):
    from transformers import AutoConfig

    k = KINDS["clip"]
    text = {key: v for key, v in {**k.text, **fam.overrides.get("text", {})}.items() if v is not None and v is not DROP}
    vision = {**k.vision, **fam.overrides.get("vision", {})}
    vision = {key: v for key, v in vision.items() if v is not DROP and key not in ("num_labels", "num_channels")}
    return AutoConfig.for_model(fam.name, text_config=text, vision_config=vision,
                                **{key: v for key, v in fam.overrides.items() if key not in ("text", "vision")})


_T5 = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
           relative_attention_num_buckets=8, decoder_start_token_id=0)
_MLA = dict(kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
            head_dim=8, n_group=1, topk_group=1, n_shared_experts=1, first_k_dense_replace=1,
            num_key_value_heads=4)  # MLA: one key/value head per query head, as the real configs
# Swin maps num_attention_heads/num_hidden_layers onto its per-stage lists.
_SWIN = dict(embed_dim=16, depths=[1, 1], num_attention_heads=[2, 2], num_hidden_layers=DROP, hidden_size=DROP,
             window_size=2, patch_size=4)
_CONV_STAGES = dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)

_ROWS = [
    # decoder LMs
    ("llama", "causal-lm", {}), ("mistral", "causal-lm", {}), ("qwen2", "causal-lm", {}),
    ("qwen3", "causal-lm", {}), ("gemma", "causal-lm", {}), ("gemma2", "causal-lm", {}),
    ("gemma3_text", "causal-lm", {}), ("phi", "causal-lm", {}), ("phi3", "causal-lm", {}),
    ("gpt2", "causal-lm", {}), ("gpt_neox", "causal-lm", {}), ("opt", "causal-lm", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    ("falcon", "causal-lm", {"head_dim": DROP}), ("bloom", "causal-lm", {}),
    ("gptj", "causal-lm", {"rotary_dim": 4, "n_inner": 64}), ("codegen", "causal-lm", {"rotary_dim": 4, "n_inner": 64}),
    ("gpt_neo", "causal-lm", {"attention_types": [[["global", "local"], 1]], "window_size": 4}),
    ("starcoder2", "causal-lm", {}), ("olmo", "causal-lm", {}), ("olmo2", "causal-lm", {}), ("olmo3", "causal-lm", {}),
    ("cohere", "causal-lm", {}), ("cohere2", "causal-lm", {}), ("stablelm", "causal-lm", {}),
    ("granite", "causal-lm", {}), ("glm", "causal-lm", {}), ("glm4", "causal-lm", {}),
    ("helium", "causal-lm", {}), ("smollm3", "causal-lm", {}), ("exaone4", "causal-lm", {}),
    ("ministral", "causal-lm", {}), ("mpt", "causal-lm", {}), ("persimmon", "causal-lm", {}),
    ("xglm", "causal-lm", {"ffn_dim": 64}), ("biogpt", "causal-lm", {}), ("gpt_bigcode", "causal-lm", {}),
    ("nemotron", "causal-lm", {}), ("ernie4_5", "causal-lm", {}), ("hunyuan_v1_dense", "causal-lm", {}),
    ("apertus", "causal-lm", {}), ("arcee", "causal-lm", {}), ("seed_oss", "causal-lm", {}),
    ("lfm2", "causal-lm", {}), ("diffllama", "causal-lm", {}), ("doge", "causal-lm", {}),
    ("vaultgemma", "causal-lm", {}), ("bitnet", "causal-lm", {}), ("openai-gpt", "causal-lm", {}),
    ("ctrl", "causal-lm", {"dff": 64}), ("jais2", "causal-lm", {}), ("nanochat", "causal-lm", {}),
    ("cwm", "causal-lm", {}), ("mamba", "causal-lm", {}), ("rwkv", "causal-lm", {}),
    # MoE LMs
    ("mixtral", "moe-lm", {}), ("qwen2_moe", "moe-lm", {}), ("qwen3_moe", "moe-lm", {}),
    ("deepseek_v2", "moe-lm", _MLA), ("deepseek_v3", "moe-lm", _MLA), ("olmoe", "moe-lm", {}),
    ("granitemoe", "moe-lm", {}), ("granitemoeshared", "moe-lm", {}), ("phimoe", "moe-lm", {}),
    ("jetmoe", "moe-lm", {}), ("ernie4_5_moe", "moe-lm", {}), ("glm4_moe", "moe-lm", {}),
    ("gpt_oss", "moe-lm", {}), ("minimax", "moe-lm", {}), ("hunyuan_v1_moe", "moe-lm", {}),
    ("flex_olmo", "moe-lm", {}), ("afmoe", "moe-lm", {}), ("exaone_moe", "moe-lm", {}),
    ("cohere2_moe", "moe-lm", {}), ("llama4_text", "moe-lm", {}), ("solar_open", "moe-lm", {}),
    ("laguna", "moe-lm", {}), ("minimax_m2", "moe-lm", {}),
    ("dots1", "moe-lm", {"n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}),
    # encoders (masked LM)
    ("bert", "masked-lm", {}), ("roberta", "masked-lm", {}), ("distilbert", "masked-lm", {"dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4}),
    ("albert", "masked-lm", {"embedding_size": 16}), ("electra", "masked-lm", {"embedding_size": 16}),
    ("deberta", "masked-lm", {}), ("deberta-v2", "masked-lm", {}), ("xlm-roberta", "masked-lm", {}),
    ("camembert", "masked-lm", {}), ("mpnet", "masked-lm", {}), ("ernie", "masked-lm", {}),
    ("modernbert", "masked-lm", {}), ("megatron-bert", "masked-lm", {}), ("convbert", "masked-lm", {"embedding_size": 32}),
    ("rembert", "masked-lm", {"input_embedding_size": 16, "output_embedding_size": 16}),
    ("roformer", "masked-lm", {}), ("esm", "masked-lm", {}), ("nystromformer", "masked-lm", {"num_landmarks": 4, "segment_means_seq_len": 8}),
    ("ibert", "masked-lm", {}), ("layoutlm", "masked-lm", {"max_2d_position_embeddings": 64}),
    ("data2vec-text", "masked-lm", {}), ("roberta-prelayernorm", "masked-lm", {}), ("big_bird", "masked-lm", {"attention_type": "original_full"}),
    ("fnet", "masked-lm", {}), ("eurobert", "masked-lm", {}), ("nomic_bert", "masked-lm", {}),
    ("yoso", "masked-lm", {}), ("mra", "masked-lm", {}),
    ("mobilebert", "masked-lm", {"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32, "num_feedforward_networks": 1}),
    ("squeezebert", "masked-lm", {"embedding_size": 32}),
    ("funnel", "masked-lm", {"block_sizes": [1, 1], "num_decoder_layers": 1, "d_model": 32, "n_head": 4, "d_head": 8,
                             "d_inner": 64, "num_hidden_layers": DROP}),
    # seq2seq
    ("t5", "seq2seq", _T5), ("mt5", "seq2seq", _T5), ("umt5", "seq2seq", _T5),
    ("longt5", "seq2seq", {**_T5, "encoder_attention_type": "local", "local_radius": 4}),
    ("switch_transformers", "seq2seq", {**_T5, "num_sparse_encoder_layers": 1, "num_sparse_decoder_layers": 1,
                                        "num_experts": 4, "expert_capacity": 16}),
    ("bart", "seq2seq", {}), ("mbart", "seq2seq", {}), ("pegasus", "seq2seq", {}), ("marian", "seq2seq", {"decoder_start_token_id": 0}),
    ("blenderbot", "seq2seq", {}), ("blenderbot-small", "seq2seq", {}), ("m2m_100", "seq2seq", {}),
    ("led", "seq2seq", {"attention_window": 8, "max_encoder_position_embeddings": 64, "max_decoder_position_embeddings": 64}),
    ("plbart", "seq2seq", {}), ("nllb-moe", "seq2seq", {"num_experts": 4, "expert_capacity": 16}),
    ("bigbird_pegasus", "seq2seq", {"attention_type": "original_full"}), ("pegasus_x", "seq2seq", {"block_size": 4, "num_global_tokens": 4}),
    ("mvp", "seq2seq", {}),
    # vision
    ("vit", "image", {}), ("deit", "image", {"architectures": ["DeiTForImageClassification"]}), ("beit", "image", {}), ("dinov2", "image", {}),
    ("dinov2_with_registers", "image", {}), ("vit_msn", "image", {}), ("data2vec-vision", "image", {}), ("ijepa", "image", {}),
    ("resnet", "image", {"embedding_size": 16, "hidden_sizes": [16, 32], "depths": [1, 1], "layer_type": "basic"}),
    ("convnext", "image", {**_CONV_STAGES, "patch_size": 4}), ("convnextv2", "image", {**_CONV_STAGES, "patch_size": 4}),
    ("swin", "image", _SWIN), ("swinv2", "image", _SWIN),
    # audio
    ("whisper", "speech-seq2seq", {}),
    ("wav2vec2", "audio-ctc", {}), ("hubert", "audio-ctc", {}), ("wavlm", "audio-ctc", {"num_buckets": 16, "max_bucket_distance": 64}),
    ("data2vec-audio", "audio-ctc", {}), ("unispeech", "audio-ctc", {}), ("unispeech-sat", "audio-ctc", {}),
    ("sew", "audio-ctc", {}), ("sew-d", "audio-ctc", {}), ("wav2vec2-conformer", "audio-ctc", {}),
    # multimodal
    ("clip", "clip", {}), ("siglip", "clip", {}), ("chinese_clip", "clip", {}), ("altclip", "clip", {}),
    ("owlvit", "clip", {}), ("groupvit", "clip", {"vision": {"depths": [1, 1], "num_group_tokens": [8, 0],
                                                             "num_output_groups": [8, 8], "num_hidden_layers": DROP}}),
    ("clipseg", "clip", {}), ("metaclip_2", "clip", {}),
]

FAMILIES = {name: Family(name, kind, overrides) for name, kind, overrides in _ROWS}

# Families whose training forward samples (e.g. GroupViT's gumbel-softmax): their backward
# runs in eval mode, so both sides compute the same function (tpu RNG streams differ from CPU's).
EVAL_BACKWARD = {"groupvit": "gumbel-softmax sampling in training mode"}

# Families whose transformers code computes something else under torch.compile (on CPU too):
# compile mode is judged against the CPU model under torch.compile(backend="aot_eager").
COMPILED_REFERENCE = {
    "doge": "its dynamic attention mask is built from another mask under torch.compile "
            "(CPU eager vs CPU aot_eager forward: 0.207 apart)",
    "nystromformer": "Dynamo's fake-tensor run of its attention fails on CPU too (a broadcast of "
                     "[2, 1, 8, 8] to [2, 4, 4, 8])",
}

# The CI subset: one or two per kind, the announced ones first.
FAST = ("llama", "qwen3_moe", "bert", "t5", "vit", "whisper", "clip")

ANNOUNCED = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma", "gemma2",
             "gemma3_text", "llama", "mistral", "mixtral", "whisper", "clip", "vit", "resnet", "bert", "t5")


def select(names=None, fast=False):
    if fast and not names:
        names = FAST
    if not names:
        return list(FAMILIES.values())
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ValueError(f"[models] unknown families: {', '.join(unknown)}; known: {', '.join(FAMILIES)}")
    return [FAMILIES[n] for n in names]
