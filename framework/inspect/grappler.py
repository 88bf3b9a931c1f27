"""TensorFlow's graph optimizer (Grappler) run on a traced function, and op counts around it.

Nothing here re-implements an optimization: the traced graph is exported as a `MetaGraphDef`
whose "train_op" collection names the function's outputs and stateful control outputs (the
fetches Grappler must keep), and `tf_optimizer.OptimizeGraph` runs TensorFlow's own passes on
it, the same meta-optimizer a `tf.function` goes through before the executor runs it. Each pass
can also run alone, so a report can say which pass folded or merged what.

Counting: the ops of the function's graph plus those of every library function it reaches
(function calls, `While`/`If` bodies, gradient functions), each function counted once however
often it is called and however many times a loop runs it. Grappler's default pipeline inlines
function calls and lowers functional control flow (a `While` becomes Enter/Merge/Switch/Exit
nodes), so after it the library usually disappears into the main graph.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
from typing import Iterable, Iterator, Mapping, Sequence

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from tensorflow.python.grappler import cluster as gcluster
from tensorflow.python.grappler import tf_optimizer

from graphfit.core.graph_rewrites import check_rewrites

__all__ = ["PASSES", "OpCounts", "PassEffect", "graph_def_of", "count_ops", "optimize",
           "compare", "run_passes"]

# Grappler's names for its passes (RewriterConfig.optimizers) and what a reader calls them.
# Each runs alone on the traced graph; "default" is the whole pipeline in TensorFlow's order.
PASSES = {
    "constfold": "constant folding",
    "common_subgraph_elimination": "common-subexpression elimination",
    "arithmetic": "arithmetic simplification",
    "dependency": "dependency optimization",
    "layout": "layout optimization",
    "remap": "remapper (op fusion)",
}
DEFAULT = "default"
_CLUSTER_LOCK = threading.Lock()
_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
# Attributes through which a node calls a library function.
_FUNCTION_ATTRS = ("f", "body", "cond", "then_branch", "else_branch", "branches")


@dataclasses.dataclass(frozen=True)
class OpCounts:
    """How many ops of each type a graph holds (main graph plus the functions it reaches).

    Attributes:
        by_type: {op type: count}, most frequent first.
        functions: the library functions counted, each once.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.inspect import grappler
        >>> f = tf.function(lambda x: tf.exp(x) + tf.exp(x))
        >>> graph = f.get_concrete_function(tf.TensorSpec([2])).graph
        >>> graph_def, fetches = grappler.graph_def_of(graph)
        >>> counts = grappler.count_ops(graph_def)
        >>> counts.total, counts.by_type["Exp"]
        (5, 2)
    """

    by_type: dict[str, int]
    functions: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.by_type.values())

    def top(self, n: int = 8) -> str:
        """"Const 79, Mul 44, ... (+12 more types)": the `n` most frequent op types."""
        items = list(self.by_type.items())
        text = ", ".join(f"{op} {count}" for op, count in items[:n])
        return text + (f", ... (+{len(items) - n} more types)" if len(items) > n else "")


@dataclasses.dataclass(frozen=True)
class PassEffect:
    """What one Grappler pass, run alone on the traced graph, changed.

    Attributes:
        name: Grappler's name for the pass ("constfold", ...), or "default" for the pipeline.
        label: what a reader calls it ("constant folding").
        ops_before, ops_after: op counts (main graph plus reached functions).
        folded: {op type: count} of nodes replaced by a constant (the node keeps its name).
        merged: (op type, removed node, kept node) for each removed node that computed what a
            kept node computes (same op, attributes and inputs): merged duplicates.
        removed: {op type: count} of the other nodes removed.
        added: {op type: count} of new nodes.
        rewritten: {"Old->New": count} of nodes kept under their name with another op type.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.inspect import grappler
        >>> f = tf.function(lambda x: tf.exp(x) + tf.exp(x))
        >>> graph_def, fetches = grappler.graph_def_of(
        ...     f.get_concrete_function(tf.TensorSpec([2])).graph)
        >>> optimized = grappler.optimize(graph_def, fetches, ["common_subgraph_elimination"])
        >>> effect = grappler.compare(graph_def, optimized, "common_subgraph_elimination", "CSE")
        >>> effect.merged
        [('Exp', 'Exp_1', 'Exp')]
        >>> effect.summary()
        'CSE: 5 -> 4 ops; merged into an identical node: Exp 1'
    """

    name: str
    label: str
    ops_before: int
    ops_after: int
    folded: dict[str, int]
    merged: list[tuple[str, str, str]]
    removed: dict[str, int]
    added: dict[str, int]
    rewritten: dict[str, int]

    @property
    def changed(self) -> bool:
        return bool(self.folded or self.merged or self.removed or self.added or self.rewritten)

    def summary(self) -> str:
        """One line: "constant folding: 6 -> 1 ops; replaced by constants: Identity 1; ..."."""
        head = f"{self.label}: {self.ops_before} -> {self.ops_after} op" + (
            "s" if self.ops_after != 1 else "")
        if not self.changed:
            return f"{head}; no change"
        parts = []
        if self.folded:
            parts.append(f"replaced by constants: {_items(self.folded)}")
        if self.merged:
            merged = collections.Counter(op for op, _, _ in self.merged)
            parts.append(f"merged into an identical node: {_items(dict(merged.most_common()))}")
        if self.rewritten:
            parts.append(f"rewritten: {_items(self.rewritten)}")
        if self.removed:
            parts.append(f"removed: {_items(self.removed)}")
        if self.added:
            parts.append(f"added: {_items(self.added)}")
        return f"{head}; " + "; ".join(parts)


def _items(counts: dict[str, int], limit: int = 6) -> str:
    items = list(counts.items())
    text = ", ".join(f"{k} {v}" for k, v in items[:limit])
    return text + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def _sorted_counts(counter: collections.Counter) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


# ----------------------------------------------------------------------- the traced graph
def graph_def_of(graph: tf.Graph) -> tuple[graph_pb2.GraphDef, list[str]]:
    """The GraphDef of a traced function's graph, and the fetches Grappler must keep.

    Args:
        graph: a `FuncGraph`, e.g. `tf_function.get_concrete_function(...).graph`.

    Returns:
        (graph_def with its function library, fetch names): the output tensors, then the
        stateful ops the function runs for their effect (variable assignments).
    """
    graph_def = graph.as_graph_def(add_shapes=True)
    fetches = [t.name for t in graph.outputs if t is not None]
    fetches += [op.name for op in getattr(graph, "control_outputs", [])]
    return graph_def, list(dict.fromkeys(fetches))


def _placed(graph_def: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """On a CPU-only machine, a copy with every unplaced node on the CPU.

    TensorFlow places a function's nodes before Grappler sees them, and device-specific passes
    (the remapper's fused CPU kernels) only touch placed nodes. With a GPU the placement is
    mixed (ops without GPU kernels stay on the CPU), so the nodes are left unplaced there.
    """
    if tf.config.list_logical_devices("GPU"):
        return graph_def
    placed = graph_pb2.GraphDef()
    placed.CopyFrom(graph_def)
    for node in placed.node:
        if not node.device:
            node.device = _CPU
    return placed


@contextlib.contextmanager
def _cluster() -> Iterator[gcluster.Cluster]:
    """One Grappler cluster (the local machine) for several runs; Grappler wants at most one
    alive at a time, so they are taken in turn."""
    with _CLUSTER_LOCK:
        cluster = gcluster.Cluster()
        try:
            yield cluster
        finally:
            cluster.Shutdown()


def optimize(graph_def: graph_pb2.GraphDef, fetches: Sequence[str],
             passes: Sequence[str] | None = None, cluster=None,
             rewrites: Mapping[str, object] | None = None) -> graph_pb2.GraphDef:
    """Runs Grappler on `graph_def`.

    Args:
        graph_def: from `graph_def_of`.
        fetches: the tensors and ops to keep (everything else may be pruned).
        passes: Grappler pass names (keys of `PASSES`, or any RewriterConfig optimizer name)
            to run alone, in order; None runs TensorFlow's default pipeline.
        cluster: a `grappler.cluster.Cluster` to reuse; None makes one for this run.
        rewrites: settings that change the pipeline, as `graphfit.core.graph_rewrites` takes
            them (an optimizer's `graph_rewrites`); None: TensorFlow's.

    Returns:
        The optimized GraphDef (with its optimized function library).
    """
    if cluster is None:
        with _cluster() as cluster:
            return optimize(graph_def, fetches, passes, cluster, rewrites)
    meta_graph = meta_graph_pb2.MetaGraphDef()
    meta_graph.graph_def.CopyFrom(_placed(graph_def))
    meta_graph.collection_def["train_op"].node_list.value.extend(fetches)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.min_graph_nodes = -1  # optimize even the tiny example graphs
    for field, value in check_rewrites(rewrites or {}).items():
        setattr(rewrite, field, value)
    if passes:
        rewrite.optimizers.extend(passes)
    return tf_optimizer.OptimizeGraph(config, meta_graph, verbose=False, cluster=cluster)


# -------------------------------------------------------------------------- counting ops
def _called_functions(node, library: set[str]) -> Iterable[str]:
    if node.op in library:
        yield node.op
    for key in _FUNCTION_ATTRS:
        if key not in node.attr:
            continue
        value = node.attr[key]
        if value.HasField("func"):
            yield value.func.name
        elif value.HasField("list"):
            yield from (f.name for f in value.list.func)


def _reached(graph_def: graph_pb2.GraphDef) -> dict[str, object]:
    """{name: FunctionDef} of the library functions the main graph reaches, in call order."""
    library = {f.signature.name: f for f in graph_def.library.function}
    names = set(library)
    gradients = {g.function_name: g.gradient_func for g in graph_def.library.gradient}
    reached: dict[str, object] = {}
    queue = [name for node in graph_def.node for name in _called_functions(node, names)]
    while queue:
        name = queue.pop(0)
        if name in reached or name not in library:
            continue
        reached[name] = library[name]
        queue += [n for node in library[name].node_def for n in _called_functions(node, names)]
        if name in gradients:
            queue.append(gradients[name])
    return reached


def _nodes(graph_def: graph_pb2.GraphDef) -> dict[tuple[str, str], object]:
    """{(function name or "", node name): NodeDef} over the main graph and reached functions."""
    nodes = {("", node.name): node for node in graph_def.node}
    for name, function in _reached(graph_def).items():
        nodes.update({(name, node.name): node for node in function.node_def})
    return nodes


def count_ops(graph_def: graph_pb2.GraphDef) -> OpCounts:
    """Op counts of the main graph plus each library function it reaches, counted once."""
    counter = collections.Counter(node.op for node in _nodes(graph_def).values())
    return OpCounts(_sorted_counts(counter), tuple(_reached(graph_def)))


# ------------------------------------------------------------------ what a pass changed
def _input_name(text: str) -> str:
    """"mul:0", "Exp:y:0" (inside a function) or "^dep" -> the node name."""
    return text.lstrip("^").split(":")[0]


def _data_inputs(node) -> list[str]:
    return [_input_name(i) for i in node.input if not i.startswith("^")]


def _signature(node, merged: dict, scope: str) -> tuple:
    """What a node computes: op, attributes and inputs with earlier merges applied (sorted,
    as Grappler canonicalizes commutative ops)."""
    attrs = tuple(sorted((k, v.SerializeToString(deterministic=True))
                         for k, v in node.attr.items() if k != "_output_shapes"))
    inputs = []
    for text in node.input:
        name = _input_name(text)
        inputs.append(text.replace(name, merged.get((scope, name), (scope, name))[1], 1))
    return node.op, attrs, tuple(sorted(inputs))


def _merges(before: dict, after: dict, removed: list, by_signature: bool) -> dict:
    """{removed key: kept key} for the removed nodes that duplicated a node still in the graph
    (same op, attributes and inputs): what common-subexpression elimination does.

    A removed node counts when its consumers now read its kept twin; with `by_signature`
    (the passes that run CSE) also when it merely computes what a kept node computes, since
    its consumers may have been merged or rewritten in turn. Other passes delete such nodes
    (a constant folded away with its consumer) without merging them."""
    consumers = collections.defaultdict(list)
    for key, node in before.items():
        for index, name in enumerate(_data_inputs(node)):
            consumers[(key[0], name)].append((key, index))
    # Candidates: the node a removed node's consumer reads now at the same input. A chain of
    # removed duplicates (Exp_1 -> mul_1 -> add) resolves one link per sweep.
    candidates: dict = {}
    for _ in range(len(removed) + 1):
        progress = False
        for key in removed:
            if key in candidates:
                continue
            for consumer, index in consumers[key]:
                target = consumer if consumer in after else candidates.get(consumer)
                inputs = _data_inputs(after[target]) if target in after else []
                kept = (key[0], inputs[index]) if index < len(inputs) else None
                if kept and kept != key and kept in before and kept in after:
                    candidates[key] = kept
                    progress = True
                    break
        if not progress:
            break
    # Keep only true duplicates; dropping one can disprove another, so repeat until stable.
    while True:
        confirmed = {k: v for k, v in candidates.items() if _signature(
            before[k], candidates, k[0]) == _signature(before[v], candidates, k[0])}
        if len(confirmed) == len(candidates):
            break
        candidates = confirmed
    if not by_signature:
        return confirmed
    # Duplicates whose consumers went too (or were rewritten): match by what they compute.
    kept_nodes = [key for key in before if key in after]
    while True:
        index = {(k[0], _signature(before[k], confirmed, k[0])): k for k in kept_nodes}
        found = {k: index[(k[0], _signature(before[k], confirmed, k[0]))] for k in removed
                 if k not in confirmed and (k[0], _signature(before[k], confirmed, k[0])) in index}
        if not found:
            return confirmed
        confirmed.update(found)


def compare(before_def: graph_pb2.GraphDef, after_def: graph_pb2.GraphDef, name: str,
            label: str) -> PassEffect:
    """What changed from `before_def` to `after_def`, node by node (matched by name)."""
    before, after = _nodes(before_def), _nodes(after_def)
    removed = [key for key in before if key not in after]
    merged = _merges(before, after, removed,
                     by_signature=name in ("common_subgraph_elimination", DEFAULT))
    folded, rewritten = collections.Counter(), collections.Counter()
    for key, node in before.items():
        if key in after and after[key].op != node.op:
            if after[key].op == "Const":
                folded[node.op] += 1
            else:
                rewritten[f"{node.op}->{after[key].op}"] += 1
    return PassEffect(
        name=name,
        label=label,
        ops_before=len(before),
        ops_after=len(after),
        folded=_sorted_counts(folded),
        merged=[(before[k].op, _display(k), _display(v)) for k, v in merged.items()],
        removed=_sorted_counts(collections.Counter(
            before[k].op for k in removed if k not in merged)),
        added=_sorted_counts(collections.Counter(
            node.op for key, node in after.items() if key not in before)),
        rewritten=_sorted_counts(rewritten),
    )


def _display(key: tuple[str, str]) -> str:
    return key[1] if not key[0] else f"{key[0]}/{key[1]}"


def run_passes(graph_def: graph_pb2.GraphDef, fetches: Sequence[str],
               passes: Sequence[str] = tuple(PASSES),
               rewrites: Mapping[str, object] | None = None,
               ) -> tuple[graph_pb2.GraphDef, list[PassEffect]]:
    """Runs each pass alone on the traced graph, then the default pipeline.

    `rewrites` changes the pipeline as the function's calls would (`optimize`); the last
    effect's label names them.

    Returns:
        (the graph after the default pipeline, one `PassEffect` per pass and a last one for
        the pipeline).
    """
    effects = []
    with _cluster() as cluster:
        for name in passes:
            optimized = optimize(graph_def, fetches, [name], cluster)
            effects.append(compare(graph_def, optimized, name, PASSES.get(name, name)))
        optimized = optimize(graph_def, fetches, cluster=cluster, rewrites=rewrites)
    label = "default pipeline" + (
        " with " + ", ".join(f"{k}={v}" for k, v in rewrites.items()) if rewrites else "")
    effects.append(compare(graph_def, optimized, DEFAULT, label))
    return optimized, effects
