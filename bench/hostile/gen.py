#!/usr/bin/env python3
"""Writes the hostile inputs of the CLI benchmark (issue 17), each one file just under 1 MB.

    bench/hostile/gen.py DIR [BYTES]

Every input is a one-file spec directory `DIR/NAME/input.berth`, deterministic (fixed seed):

- `random-tokens`: tokens drawn at random (keywords, names, numbers, strings, operators,
  empty bracket pairs, line breaks): thousands of syntax errors. Brackets come in pairs, so
  the nesting limit does not cut the file short.
- `one-line`: the same kind of tokens on a single line of about 200,000 tokens.
- `consts`: consecutive `const` items (about 50,000).
- `long-list`: one `const` bound to a list of about 150,000 elements.
- `deny-rules`: a valid spec of 2,000 targets, 2,000 workloads and 600 deny rules that never
  hold, then one that forbids every placement: every pair walks the rules (issue 18: the fleet
  analysis of `check` took 37 s, `plan` 6.3 s).
"""

import os
import random
import sys

VOCAB = [
    "workload", "target", "model", "policy", "placement", "const", "use", "deny", "when",
    "and", "or", "not", "in", "true", "false", "web", "gpu", "replicas", "memory", "x",
    "16GiB", "2", "0.5", "10:00", '"s"', "{ }", "[ ]", "( )", ",", ":", ".", "=",
    "==", "<", ">=", "->", "+", "-", "*", "/",
]


def tokens(rng, budget, newline_every):
    out, size, n = [], 0, 0
    while True:
        tok = rng.choice(VOCAB)
        sep = "\n" if newline_every and rng.randrange(newline_every) == 0 else " "
        if size + len(tok) + 1 > budget:
            break
        out.append(tok + sep)
        size += len(tok) + 1
        n += 1
    return "".join(out)


def consts(budget):
    out, size, i = [], 0, 0
    while True:
        line = f"const c{i} = {i}\n"
        if size + len(line) > budget:
            break
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out)


def long_list(budget):
    head, tail = "const l = [", "]\n"
    n = (budget - len(head) - len(tail)) // 3
    return head + ", ".join(["1"] * n) + tail


def deny_rules(budget):
    n, rules = 2000, 600
    out = []
    for i in range(n):
        out.append(f"target t{i} {{ class = datacenter  runtime = local  connectivity = connected  cpu = 64  memory = 64GiB }}\n")
    for i in range(n):
        out.append(f'workload w{i} {{ release = "1"  image = "w:1"  class = production  identity = service_account("s{i}")  resources {{ cpu = 1  memory = 1GiB }} }}\n')
    out.append("policy p {\n")
    for i in range(rules):
        out.append(f'  deny "r{i}" when workload.replicas == {i + 100}\n')
    out.append('  deny "all" when target.class == datacenter\n}\n')
    text = "".join(out)
    assert len(text.encode()) <= budget, len(text)
    return text


def main():
    root = sys.argv[1]
    budget = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000 - 1024
    inputs = {
        "random-tokens": tokens(random.Random(1), budget, 8),
        "one-line": tokens(random.Random(2), budget, 0) .rstrip() + "\n",
        "consts": consts(budget),
        "long-list": long_list(budget),
        "deny-rules": deny_rules(budget),
    }
    for name, text in inputs.items():
        os.makedirs(os.path.join(root, name), exist_ok=True)
        with open(os.path.join(root, name, "input.berth"), "w") as f:
            f.write(text)
        print(f"{name}: {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
