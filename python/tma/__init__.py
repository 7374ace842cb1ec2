"""tma from Python: graph files as numpy arrays, run folders, and the
`tma train` / `tma launch` commands (docs/python.md).

The package reads tma's documented file formats with numpy (no compiled
code, so `pip install ./python` needs no compiler and never gets out of step
with a differently built library) and runs the installed `tma` program for
everything that computes.
"""

from ._format import TmaError, crc32c
from ._graph import Graph, open_graph, save_graph
from ._run import Run, Weights, launch, read_weights, train
from ._torch import torch_model

__all__ = ["Graph", "Run", "TmaError", "Weights", "crc32c", "launch", "open_graph", "read_weights",
           "save_graph", "torch_model", "train"]
__version__ = "0.1.0"
