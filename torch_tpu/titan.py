"""TorchTitan on tpu: `python -m torch_tpu.titan [--device tpu|cpu] TORCHTITAN ARGS...`.

Runs TorchTitan's own entry point (`torchtitan.train.main`: its ConfigManager, config
registry and Trainer) with torch_tpu imported first, so TorchTitan's device discovery
(`torch._utils._get_available_device_type`, read when torchtitan is imported) finds "tpu" and
its process group backend is "tpu_dist" (the default backend of device "tpu"). `--device cpu`
runs the same trainer on PyTorch CPU with gloo, the reference the tests compare with.

TorchTitan comes from `make titan` (tools/titan: pinned wheels in the environment's
titan-site, added to sys.path here). Under torchrun, or `python -m torch_tpu.distributed.run`
where PyTorch lacks libuv (Debian's), every rank runs this module:
    python -m torch_tpu.distributed.run --nproc-per-node 2 -m torch_tpu.titan \\
        --module llama3 --config llama3_debugmodel --hf_assets_path DIR ...
Alone, it sets the single-process rendezvous variables torchrun would set.

`make_assets(dir)` writes what TorchTitan would fetch from the hub, locally: a byte-level BPE
tokenizer (tokenizer.json / tokenizer_config.json) and a small text dataset in the layout of
TorchTitan's `c4_test` (json lines with a "text" field).
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

TITAN_SITE = "/usr/local/lib/torch_tpu/titan-site"


def add_site() -> None:
    """Puts the environment's titan-site on sys.path (first; with the protobuf it pins:
    tensorboard needs protobuf >= 6.31, newer than Debian's). Self-contained, unlike
    torch_tpu._internal.sites: the CPU reference run must not import the torch_tpu package."""
    if not os.path.isdir(TITAN_SITE):
        raise ImportError(f"[torch_tpu.titan] TorchTitan is not installed; expected {TITAN_SITE} "
                          "(run `make titan`, which runs tools/titan)")
    if TITAN_SITE not in sys.path:
        sys.path.insert(0, TITAN_SITE)
    for name in [m for m in sys.modules if m == "google.protobuf" or m.startswith("google.protobuf.")]:
        del sys.modules[name]


class _CpuDevice:
    """torch.cpu with the few torch.cuda-style calls TorchTitan's memory monitor makes
    (device name, capacity, memory stats): the CPU reference run's device module."""

    def __init__(self):
        import torch

        self._cpu = torch.cpu

    def __getattr__(self, name):
        return getattr(self._cpu, name)

    @staticmethod
    def get_device_name(device=None) -> str:
        return "cpu"

    @staticmethod
    def current_device() -> int:  # torch.cpu's is the string "cpu"; barrier(device_ids=) wants an int
        return 0

    @staticmethod
    def get_device_properties(device=None):
        import types

        return types.SimpleNamespace(name="cpu", total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    @staticmethod
    def memory_stats(device=None) -> dict:
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None


def _use_cpu() -> None:
    """TorchTitan's device discovery answers "cpu" (its `device_type` falls back to "cuda"
    when no accelerator is found, and CPU is not an accelerator to torch._utils), with a
    device module for it (_CpuDevice)."""
    import torch._utils

    cpu = _CpuDevice()
    orig = torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda device_type=None: cpu if device_type in (None, "cpu") else orig(device_type)


def _gloo_sum_reduction() -> None:
    """FSDP2 reduce-scatters TorchTitan's gradients with ReduceOp.PREMUL_SUM(1.0) (TorchTitan
    disables FSDP's gradient division), which gloo refuses; on CPU it takes FSDP2's own SUM
    path (the one it forces for MTIA): the same sums."""
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives as fc

    orig = fc._get_gradient_divide_factors

    def factors(reduce_scatter_group, all_reduce_group, reduce_dtype, device_type="", factor=None,
                force_sum_reduction_for_comms=False):
        return orig(reduce_scatter_group, all_reduce_group, reduce_dtype, device_type, factor,
                    force_sum_reduction_for_comms or device_type == "cpu")

    fc._get_gradient_divide_factors = factors


def _cpu_flex_reference() -> None:
    """FlexAttention on CPU, forward and backward, through PyTorch's own dense implementation
    of the HOP: TorchTitan calls a `torch.compile(flex_attention)` (Inductor), whose CPU kernel
    has no backward, and `flex_attention` refuses CPU backward for that reason. The reference
    run calls `flex_attention` itself, with the refusal lifted for CPU (the dense math path it
    guards computes the backward in float32)."""
    import torch.nn.attention.flex_attention as fa
    from torchtitan.models.common.attention import FlexAttention

    orig = fa._validate_device

    def _validate_device(query, key, value):
        if query.device.type == "cpu":
            return None
        return orig(query, key, value)

    fa._validate_device = _validate_device
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
    FlexAttention._compiled_flex_attn = fa.flex_attention


def _no_libuv_store() -> None:
    """The CPU run's TCPStore fallback for a PyTorch without libuv (torch_tpu/distributed/store.py,
    loaded by path: the CPU reference never imports the torch_tpu package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_torch_tpu_store", os.path.join(os.path.dirname(__file__), "distributed", "store.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.install()


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (a rendezvous port for a launch)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _single_process_env() -> None:
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1"),
                 ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(k, v)
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())


TEXT = ("The quick brown fox jumps over the lazy dog. A model learns the patterns of its text, "
        "one token after another, step after step. Attention looks back at what came before; "
        "the feed-forward layers mix each position on its own. Numbers such as 3, 14, 159 and "
        "2653 appear too, and so do questions: what comes next? ")


def make_assets(root: str | os.PathLike, docs: int = 400, vocab: int = 512) -> tuple[str, str]:
    """Writes a tokenizer dir and a dataset dir under `root`; returns (tokenizer_dir, data_dir)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root = pathlib.Path(root)
    tok_dir, data_dir = root / "tokenizer", root / "c4_mini"
    tok_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    words = TEXT.split()
    lines = []
    for i in range(docs):  # varied documents: rotations and lengths of the text
        k = (i * 7) % len(words)
        n = 20 + (i * 13) % 60
        lines.append(" ".join((words[k:] + words[:k]) * 2)[: n * 6])
    with open(data_dir / "c4_mini.json", "w") as f:
        for line in lines:
            f.write(json.dumps({"text": line}) + "\n")
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.save(str(tok_dir / "tokenizer.json"))
    with open(tok_dir / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": True,
                   "add_eos_token": False, "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return str(tok_dir), str(data_dir)


def _pop(argv: list[str], flag: str, default: str) -> str:
    if flag not in argv:
        return default
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


def _write_report(path: str) -> None:
    """TORCH_TPU_TITAN_REPORT: this rank's torch.compile and FlexAttention counters (json), so a
    test can tell that our backend compiled and the tpu FlexAttention kernels ran."""
    import torch.distributed as dist

    from torch_tpu._internal import compile as tpu_compile
    from torch_tpu._internal import flex_attention

    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else int(os.environ.get("RANK", "0"))
    with open(f"{path}.rank{rank}.json", "w") as f:
        json.dump({"compile": tpu_compile.stats(), "graphs": tpu_compile.graphs_report(),
                   "flex_attention": flex_attention.stats()}, f, default=str)


def main(argv: list[str] | None = None) -> None:
    """Options of ours, before TorchTitan's: --device tpu|cpu; --precision default|high|highest
    (tpu matmuls, torch.tpu.precision's names)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    device = _pop(argv, "--device", "tpu")
    precision = _pop(argv, "--precision", "default")
    if device not in ("tpu", "cpu"):
        raise SystemExit(f"[torch_tpu.titan] --device must be tpu or cpu; got {device!r}")
    if device == "cpu" and "torch_tpu" in sys.modules:
        # `python -m torch_tpu.titan` imported the package, and with it device "tpu" (also
        # torch's autoload does): the CPU reference runs this file in a fresh interpreter that
        # never loads the backend, so PyTorch's accelerator is none, as on a CPU machine.
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", USE_LIBUV="0")  # Debian torch: no libuv
        code = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        os.execve(sys.executable, [sys.executable, "-c", code, __file__, "--device", "cpu", "--precision", precision,
                                   *argv], env)
    add_site()
    if device == "tpu":
        import torch_tpu  # (before torchtitan: its device_type is read at import)

        torch_tpu.set_matmul_precision(precision)
    else:
        _use_cpu()
        _no_libuv_store()
    _single_process_env()
    sys.argv = [sys.argv[0], *argv]
    from torchtitan.train import main as titan_main

    if device == "cpu":
        _cpu_flex_reference()
        _gloo_sum_reduction()
    try:
        titan_main()
    finally:
        if device == "tpu" and os.environ.get("TORCH_TPU_TITAN_REPORT"):
            _write_report(os.environ["TORCH_TPU_TITAN_REPORT"])


if __name__ == "__main__":
    main()
