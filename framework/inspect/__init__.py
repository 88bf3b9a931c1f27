"""Looking inside the traced graphs: op counts before and after Grappler, XLA HLO and its
fusions, FLOPs of the forward pass and of the training step."""

from graphfit.inspect import flops, flops_tracing, grappler, xla_report
from graphfit.inspect.graph_report import (
                                           STAGES,
                                           GraphReport,
                                           ModelCounts,
                                           flops_line,
                                           function_graph,
                                           model_flops,
                                           step_flops,
                                           step_graph,
)

__all__ = ["GraphReport", "ModelCounts", "STAGES", "flops", "flops_line", "flops_tracing",
           "function_graph", "grappler", "model_flops", "step_flops", "step_graph",
           "xla_report"]
