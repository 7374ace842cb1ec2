"""Run folders (`Run`), weight files, and the tma commands as child processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterable, Optional, Union

import numpy as np

from ._format import TMAW_HEADER, TmaError, crc32c, read_tmaw_header


def find_tma(tma_bin: Optional[str] = None) -> str:
    """The tma program: tma_bin, else $TMA_BIN, else `tma` on PATH."""
    exe = tma_bin or os.environ.get("TMA_BIN") or shutil.which("tma")
    if not exe or not os.access(exe, os.X_OK):
        raise TmaError("the tma program was not found: install tma (make install), put it on PATH, "
                       "or pass tma_bin= / set TMA_BIN")
    return exe


def _error_line(lines: list) -> str:
    """What went wrong: the last ERROR line (without its time stamp), then
    the command's own last `tma CMD: ...` line when it says more."""
    errors = [line.split(" ERROR ", 1)[1].strip() for line in lines if " ERROR " in line]
    final = [line.strip() for line in lines if line.startswith("tma ")]
    told = [f for f in final if not re.match(r"tma [\w ]+: failed: ", f)]  # not the generic last words
    first = errors[-1:] or told[-1:]
    parts = first + [f for f in final[-1:] if not first or first[0] not in f]
    if parts:
        return "; ".join(parts)
    return lines[-1].strip() if lines else "no output"


def run_command(args: list, *, tma_bin: Optional[str] = None, quiet: bool = False, progress: bool = False) -> str:
    """Runs `tma ARGS...` to its end and returns its standard output.  With
    progress, its output lines are shown as they come (under a tqdm bar
    when tqdm is installed).  A failure raises TmaError with the command's
    error line and exit code; Ctrl-C stops the command as it does in a
    shell (SIGINT, then a wait for it to write what it has) and re-raises."""
    cmd = [find_tma(tma_bin)] + [str(a) for a in args]
    err_lines: list = []
    out_chunks: list = []
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        bar = None
        if progress and not quiet:
            try:
                from tqdm import tqdm
                bar = tqdm(desc="tma " + args[0], unit=" lines", leave=False)
            except ImportError:
                bar = None
        try:
            for line in p.stdout:
                out_chunks.append(line)
                if progress and not quiet:
                    if bar is not None:
                        bar.update(1)
                        bar.write(line.rstrip("\n"))
                    else:
                        sys.stderr.write(line)
            code = p.wait()
        except KeyboardInterrupt:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            raise
        finally:
            if bar is not None:
                bar.close()
        err.seek(0)
        err_lines = err.read().splitlines()
    if code != 0:
        raise TmaError(_error_line(err_lines), code)
    return "".join(out_chunks)


@dataclass
class Weights:
    """A .tmaw weight file: its model section (`model`, as in a config's
    "model"), the round (or step) it comes from, and the parameters as one
    float32 array in tma's layout (`Run.export` gives them by name)."""

    path: str
    model: dict
    round: int
    params: np.ndarray


def read_weights(path: str) -> Weights:
    """Reads a .tmaw file (docs/model.md), checking its header and model checksums and its size."""
    with open(path, "rb") as f:
        head = f.read(TMAW_HEADER)
        h = read_tmaw_header(path, head)
        text = f.read(h["json_len"])
    if len(text) != h["json_len"] or crc32c(text) != h["json_crc"]:
        raise TmaError("%s: the model section's checksum does not match" % path)
    off = TMAW_HEADER + (h["json_len"] + 63) // 64 * 64
    if os.path.getsize(path) != off + 4 * h["count"]:
        raise TmaError("%s: %d bytes, the header says %d" % (path, os.path.getsize(path), off + 4 * h["count"]))
    params = np.memmap(path, dtype="<f4", mode="r", offset=off, shape=(h["count"],))
    return Weights(path=path, model=json.loads(text.decode()), round=h["round"], params=params)


class Run:
    """A run folder of `tma train` or `tma launch` (docs/formats.md, "Run
    folders"): `result` and `config` (dicts), `metrics` (one row a round: a
    pandas DataFrame when pandas is installed, else a list of dicts),
    `weights()` and `export()`."""

    def __init__(self, path: str, *, tma_bin: Optional[str] = None):
        self.path = os.path.abspath(path)
        self._tma_bin = tma_bin
        if not any(os.path.exists(os.path.join(self.path, n)) for n in ("result.json", "metrics.jsonl")):
            raise TmaError("%s is not a run folder (no result.json or metrics.jsonl)" % path)

    def _json(self, name: str) -> dict:
        p = os.path.join(self.path, name)
        if not os.path.exists(p):
            raise TmaError("%s has no %s (the run did not finish?)" % (self.path, name))
        with open(p) as f:
            return json.load(f)

    @property
    def result(self) -> dict:
        """result.json: test MRR, best round, convergence time, the budget, how it stopped."""
        return self._json("result.json")

    @property
    def config(self) -> dict:
        """The configuration the run used (config.json, or job.json of a launch)."""
        for name in ("config.json", "job.json"):
            if os.path.exists(os.path.join(self.path, name)):
                return self._json(name)
        raise TmaError("%s has no config.json or job.json" % self.path)

    def metrics_rows(self) -> list:
        """metrics.jsonl as a list of dicts, one a round (or evaluation)."""
        p = os.path.join(self.path, "metrics.jsonl")
        with open(p) as f:
            return [json.loads(line) for line in f if line.strip()]

    @property
    def metrics(self):
        """metrics.jsonl: a pandas DataFrame when pandas is installed, else a list of dicts."""
        rows = self.metrics_rows()
        try:
            import pandas as pd
        except ImportError:
            return rows
        return pd.DataFrame(rows)

    def weights(self, which: str = "best") -> Weights:
        """The weights: "best" (best.tmaw), "last" (the newest checkpoint of a
        launch), or a file name in the folder."""
        if which == "best":
            name = "best.tmaw"
        elif which == "last":
            cks = sorted(n for n in os.listdir(self.path) if n.startswith("checkpoint-r") and n.endswith(".tmaw"))
            if not cks:
                raise TmaError("%s holds no checkpoint (a tma train run keeps best.tmaw only)" % self.path)
            name = cks[-1]
        else:
            name = which
        return read_weights(os.path.join(self.path, name))

    def export(self, graph: Optional[str] = None) -> dict:
        """`tma export` of the best weights: {"state_dict": {name: array}
        (PyTorch names and shapes), "embeddings": every node's embedding,
        "model": the model config}."""
        with tempfile.TemporaryDirectory(prefix="tma-export-") as tmp:
            args = ["export", self.path, "-o", tmp] + (["--graph", graph] if graph else [])
            run_command(args, tma_bin=self._tma_bin, quiet=True)
            with np.load(os.path.join(tmp, "model.npz")) as z:
                state = {k: np.array(z[k]) for k in z.files}
            emb = np.load(os.path.join(tmp, "embeddings.npy"))
            with open(os.path.join(tmp, "model.json")) as f:
                model = json.load(f)
        return {"state_dict": state, "embeddings": emb, "model": model}

    def __repr__(self) -> str:
        return "Run(%r)" % self.path


def _config_file(config: Union[str, dict, None], tmp: str) -> Optional[str]:
    if config is None or isinstance(config, str):
        return config
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def train(graph: str, out: str, *, config: Union[str, dict, None] = None, steps: Optional[int] = None,
          seconds: Optional[float] = None, force: bool = False, args: Iterable[str] = (),
          progress: bool = True, tma_bin: Optional[str] = None) -> Run:
    """`tma train GRAPH -o OUT`: one model on the whole graph.  config is a
    config dict or a JSON file; steps or seconds the budget; args more
    flags.  Returns the Run; a failure raises TmaError."""
    with tempfile.TemporaryDirectory(prefix="tma-train-") as tmp:
        cmd = ["train", graph, "-o", out]
        cfg = _config_file(config, tmp)
        if cfg:
            cmd += ["--config", cfg]
        if steps is not None:
            cmd += ["--steps", str(int(steps))]
        if seconds is not None:
            cmd += ["--seconds", repr(float(seconds))]
        if force:
            cmd.append("--force")
        run_command(cmd + list(args), tma_bin=tma_bin, progress=progress)
    return Run(out, tma_bin=tma_bin)


def launch(config: Union[str, dict], out: str, *, force: bool = False, args: Iterable[str] = (),
           progress: bool = True, tma_bin: Optional[str] = None) -> Run:
    """`tma launch CONFIG -o OUT`: a whole distributed job on this machine
    (a private etcd, the coordinator and the workers).  Returns the Run; a
    failure raises TmaError."""
    with tempfile.TemporaryDirectory(prefix="tma-launch-") as tmp:
        cmd = ["launch", _config_file(config, tmp), "-o", out]
        if force:
            cmd.append("--force")
        run_command(cmd + list(args), tma_bin=tma_bin, progress=progress)
    return Run(out, tma_bin=tma_bin)
