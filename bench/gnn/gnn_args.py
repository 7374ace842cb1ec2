"""gnn_args.py: the command line that torch_gnn.py and dgl_gnn.py share, so that
bench_gnn.sh drives both sides alike.  It imports nothing heavy: dgl_gnn.py parses
it before torch and DGL start their OpenMP runtimes."""
import argparse


def parse(description, encoders):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("graph")
    ap.add_argument("--encoder", default="sage", choices=encoders)
    ap.add_argument("--heads", type=int, default=1)  # gat: attention heads
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--decoder-layers", type=int, default=2)
    ap.add_argument("--decoder-hidden", type=int, default=256)
    ap.add_argument("--fanouts", default="25,10")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--eval-batch-edges", type=int, default=32)
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not a.steps and a.seconds <= 0:
        a.seconds = 20
    return a
