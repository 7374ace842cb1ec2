"""bench/paper/tables.py: the tables that bench/paper/run.sh prints from its run folders.

  tables.py grid ROOT GRAPH "ROW..." COL=LABEL...   (Tables 4, 5 and 8: ROOT/GRAPH-COL/ROW-sS)
  tables.py table6 ROOT GRAPH "VARIANT..." "POLICY..."

Each run folder is a `tma launch` or `tma train` run (result.json, metrics.jsonl, config.json).
Convergence is the paper's: the first validation within 1 % of the run's best validation MRR, in
training seconds (result.json) and in local steps a worker (from metrics.jsonl).
"""
import json, os, statistics, sys


def runs(d, row):
    """The result.json of every seed of ROW in folder d, with the convergence step added."""
    out = []
    if not os.path.isdir(d):
        return out
    for n in sorted(os.listdir(d)):
        f = os.path.join(d, n, "result.json")
        if not (n.startswith(row + "-s") and n[len(row) + 2:].isdigit() and os.path.exists(f)):
            continue
        res = json.load(open(f))
        res["convergence_steps"] = convergence_steps(os.path.join(d, n))
        out.append(res)
    return out


def convergence_steps(run):
    """Local steps a worker had done at the first validation within 1 % of the best."""
    rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
    rows = [r for r in rows if r.get("val_mrr") is not None]
    if not rows:
        return None
    best = max(r["val_mrr"] for r in rows)
    first = next(r for r in rows if r["val_mrr"] >= 0.99 * best)
    if "steps" in first:  # tma train: steps so far
        return first["steps"]
    cfg = json.load(open(os.path.join(run, "config.json")))
    return first["round"] * cfg["aggregation"].get("interval_steps", 0)


def fmt(xs, f="%.4f"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return (f + " ± " + f) % (statistics.mean(xs), sd)


def grid(root, g, rows, cols):
    cols = [c.split("=", 1) for c in cols]
    data = {(r, c): runs(os.path.join(root, g + "-" + c), r) for r in rows for c, _ in cols}
    n = max([len(x) for x in data.values()] + [0])
    blocks = [
        ("test MRR (mean ± std over seeds)", lambda x: fmt([y["test_mrr"] for y in x])),
        ("convergence, training seconds", lambda x: fmt([y["convergence_seconds"] for y in x], "%.1f")),
        ("convergence, local steps a worker", lambda x: fmt([y["convergence_steps"] for y in x], "%.0f")),
        ("edge ratio r", lambda x: fmt([y.get("edge_ratio") for y in x], "%.3f")),
        ("seeds", lambda x: str(len(x))),
    ]
    for title, cell in blocks:
        print("\n%s\n" % title)
        print("| variant | " + " | ".join(label for _, label in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for r in rows:
            print("| %s | " % r + " | ".join(cell(data[(r, c)]) for c, _ in cols) + " |")
    if n == 0:
        print("no runs found under %s" % root, file=sys.stderr)


def table6(root, g, variants, policies):
    def mrrs(d, v):
        return [x["test_mrr"] for x in runs(d, v)]

    def cell(x):
        if not x:
            return "%-17s" % "-"
        return "%s (%d)" % (fmt(x), len(x))

    hdr = "%-10s %-20s" % ("variant", "F = 0")
    for p in policies:
        hdr += " %-20s %8s" % ("F = 1 " + p, "loss")
    print(hdr)
    for v in variants:
        f0 = mrrs(os.path.join(root, g), v)
        row = "%-10s %-20s" % (v, cell(f0))
        for p in policies:
            f1 = mrrs(os.path.join(root, g + "-F1-" + p), v)
            loss = "-" if not (f0 and f1) else "%.2f%%" % (100 * (1 - statistics.mean(f1) / statistics.mean(f0)))
            row += " %-20s %8s" % (cell(f1), loss)
        print(row)


if __name__ == "__main__":
    cmd, root, g = sys.argv[1:4]
    if cmd == "grid":
        grid(root, g, sys.argv[4].split(), sys.argv[5:])
    elif cmd == "table6":
        table6(root, g, sys.argv[4].split(), sys.argv[5].split())
    else:
        sys.exit("usage: tables.py grid|table6 ROOT GRAPH ...")
