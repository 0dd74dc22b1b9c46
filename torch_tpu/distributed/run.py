"""`python -m torch_tpu.distributed.run [torchrun args] script.py ...`: torchrun, usable on a
PyTorch built without libuv (Debian's, the one in tools/in-env), where torchrun's rendezvous
fails with "use_libuv was requested but PyTorch was built without libuv support". The launcher's
rendezvous modules get store.TCPStore (a fallback to the non-libuv store; see store.py);
everything else is torchrun's own code. The workers import torch_tpu, which installs the same
fallback for init_process_group. With a PyTorch that has libuv, plain `torchrun` is the same.
"""
import sys

import torch.distributed as dist

from torch_tpu.distributed import store


def main(argv=None) -> None:
    from torch.distributed import run
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, static_tcp_rendezvous

    store.install([dist, static_tcp_rendezvous, c10d_rendezvous_backend])
    run.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
