"""Resolves a git merge conflict in torch_tpu/opinfo/expected_failures.txt: a line survives
when neither side deleted it; lines either side added are kept (the list only shrinks)."""
import subprocess

F = "torch_tpu/opinfo/expected_failures.txt"


def stage(n):
    return subprocess.run(["git", "show", f":{n}:{F}"], capture_output=True, text=True, check=True).stdout.splitlines()


base, ours, theirs = (set(stage(n)) for n in (1, 2, 3))
header = [l for l in stage(2) if l.startswith("#")]
body = {l for l in base | ours | theirs if l.strip() and not l.startswith("#")}
keep = sorted(l for l in body if not (l in base and (l not in ours or l not in theirs)))
open(F, "w").write("\n".join(header + keep) + "\n")
print(f"{F}: base {len(base)}, ours {len(ours)}, theirs {len(theirs)} -> {len(header) + len(keep)} lines")
