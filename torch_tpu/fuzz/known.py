"""The known-failures list (known_failures.txt next to this file). One line per known
failure: `<op> <category> [tag,tag,...]  # cause`. A failure matches a line when its op
(`opdb:<entry>` or `table:<row>`) and category are the line's and it carries every listed
tag (dtype:<d>, variant:<v> and mode:<m> count as tags; a tag without a value, like
`mixdtype`, matches any value). The list only shrinks: `make fuzz` reports lines no failure matched."""
import dataclasses
import os

PATH = os.path.join(os.path.dirname(__file__), "known_failures.txt")


@dataclasses.dataclass
class Line:
    n: int
    op: str
    category: str
    tags: tuple
    text: str


def load(path=PATH):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            body = raw.split("#", 1)[0].strip()
            if not body:
                continue
            parts = body.split()
            if len(parts) not in (2, 3) or "#" not in raw:
                raise ValueError(f"[fuzz] {path}:{n}: expected '<op> <category> [tags]  # cause'; got {raw.strip()!r}")
            tags = tuple(parts[2].split(",")) if len(parts) == 3 else ()
            out.append(Line(n, parts[0], parts[1], tags, raw.strip()))
    return out


def match(lines, failure):
    tags = set(failure.get("tags") or ()) | {f"{k}:{failure.get(k)}" for k in ("dtype", "variant", "mode")}
    for line in lines:
        if line.op == failure["op"] and line.category == failure["category"] and all(_has(tags, t) for t in line.tags):
            return line
    return None


def _has(tags, t):
    """A tag without a value ("mixdtype") matches any value ("mixdtype:int32")."""
    return t in tags or (":" not in t and any(x.startswith(t + ":") for x in tags))
