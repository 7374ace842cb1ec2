"""ogb_eval.py: tma's MRR and Hits@K against the ogb package's own Evaluator,
and its AUC against scikit-learn's roc_auc_score.

  ogb_eval.py scores SCORES ROWS PER      writes scores with many ties
  ogb_eval.py compare SCORES ROWS PER PESSIMISTIC.json MEAN.json

The scores are rounded to a few levels, so positives tie with negatives
often (and some rows are all one value): exactly where the tie rules differ.
OGB's Evaluator('ogbl-citation2') gives the MRR and Hits@1/3/10 under its
rule (the mean of the optimistic and pessimistic rank); Hits@50/100 and the
pessimistic rule use the same rank expressions as ogb's _eval_mrr.
"""
import json
import os
import sys

os.environ["OUTDATED_IGNORE"] = "1"  # ogb may check PyPI for updates when `outdated` is installed

import numpy as np
import torch


def scores(path, rows, per):
    rng = np.random.default_rng(11)
    s = np.round(rng.standard_normal((rows, per)) * 2) / 2  # a dozen levels: many ties
    s[:, 0] = np.round(rng.standard_normal(rows) * 2 + 6) / 2  # positives mostly near the top
    s[::50] = 0.25                                          # every score equal
    s[1::50, 0] = 9.0                                       # a positive above all
    s[2::50, 0] = -9.0                                      # a positive below all
    s.astype("<f4").tofile(path)


def compare(path, rows, per, pess_json, mean_json):
    from ogb.linkproppred import Evaluator

    s = torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(rows, per))
    pos, neg = s[:, 0], s[:, 1:]
    out = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})
    # ogb's own rank expressions (linkproppred/evaluate.py, _eval_mrr).
    optimistic = (neg > pos.view(-1, 1)).sum(dim=1)
    pessimistic = (neg >= pos.view(-1, 1)).sum(dim=1)
    mean_rank = 0.5 * (optimistic + pessimistic) + 1
    pess_rank = (pessimistic + 1).to(torch.float64)
    want_mean = {"mrr": float(out["mrr_list"].double().mean())}
    for k in (1, 3, 10):
        want_mean[f"hits@{k}"] = float(out[f"hits@{k}_list"].double().mean())
    for k in (50, 100):
        want_mean[f"hits@{k}"] = float((mean_rank <= k).double().mean())
    want_pess = {"mrr": float((1.0 / pess_rank).mean())}
    for k in (1, 3, 10, 50, 100):
        want_pess[f"hits@{k}"] = float((pess_rank <= k).double().mean())
    # ogb's mrr_list is float32: 1e-6 covers its rounding, nothing more.
    tol = {"mrr": 1e-6}
    failures = []
    for name, want, got_path in (("mean", want_mean, mean_json), ("pessimistic", want_pess, pess_json)):
        got = json.load(open(got_path))
        if got["ties"] != name or got["edges"] != rows:
            failures.append(f"{name}: tma says ties {got['ties']!r}, edges {got['edges']}")
        for key, w in want.items():
            if abs(got[key] - w) > tol.get(key, 1e-12):
                failures.append(f"{name}: {key} tma {got[key]!r}, ogb {w!r}")
    # ROC AUC: each edge's positive against its own negatives (scikit-learn,
    # which counts a tie one half), averaged over the edges; the same under
    # either tie rule.
    from sklearn.metrics import roc_auc_score

    labels = np.zeros(per)
    labels[0] = 1
    sn = s.numpy().astype(np.float64)
    want_auc = float(np.mean([roc_auc_score(labels, sn[i]) for i in range(rows)]))
    for name, got_path in (("mean", mean_json), ("pessimistic", pess_json)):
        got = json.load(open(got_path))
        if abs(got.get("auc", float("nan")) - want_auc) > 1e-12:
            failures.append(f"{name}: auc tma {got.get('auc')!r}, scikit-learn {want_auc!r}")
    # The rules must really differ on these scores, or the test shows nothing.
    if abs(want_mean["mrr"] - want_pess["mrr"]) < 0.05 * want_mean["mrr"]:
        failures.append(f"the scores barely tie: MRR {want_mean['mrr']} vs {want_pess['mrr']}")
    if failures:
        sys.exit("\n".join(failures))
    print(f"ogb Evaluator MRR {want_mean['mrr']:.6f} hits@10 {want_mean['hits@10']:.4f} = tma ties=mean; "
          f"pessimistic MRR {want_pess['mrr']:.6f} = tma ties=pessimistic; AUC {want_auc:.6f} = scikit-learn")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "scores":
        scores(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 7 and sys.argv[1] == "compare":
        compare(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        sys.exit(__doc__)
