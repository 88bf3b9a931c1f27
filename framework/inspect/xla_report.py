"""What XLA makes of a `jit_compile=True` function: HLO before and after XLA's passes.

`tf.function.experimental_get_compiler_ir(*args)` returns the function's HLO module as XLA
received it from TensorFlow (stage "hlo") and after XLA's optimization pipeline (stage
"optimized_hlo": algebraic simplification, common-subexpression elimination, fusion, layout,
scheduling for the device). Both are HLO text; this module counts their instructions and the
fusions XLA made.

Counting: "before" counts every instruction of every computation in the module (reducer
bodies included). "After" counts the instructions XLA will run as kernels or calls: those of
the entry computation and of the computations it calls outside fusions; a `fusion`
instruction counts once there, and the instructions fused into it are counted apart.
"""

from __future__ import annotations

import collections
import dataclasses
import re

__all__ = ["HloComputation", "XlaReport", "parse_hlo", "from_hlo", "xla_report", "compiler_ir"]

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")
_CALLS = re.compile(
    r"\b(calls|to_apply|body|condition|branch_computations|true_computation|"
    r"false_computation)=(\{[^}]*\}|%?[\w.\-]+)")
_KIND = re.compile(r"\bkind=(k\w+)")


@dataclasses.dataclass
class HloComputation:
    """One HLO computation: its name, opcodes in order, and the computations it calls.

    Attributes:
        name: the computation's name.
        entry: whether it is the module's entry computation.
        opcodes: the opcode of each instruction, in order.
        calls: (how, callee) pairs: how is "calls", "to_apply", "body", ...
        fusion_kinds: the `kind=` of each fusion instruction (kLoop, kInput, kOutput, ...).

    Example:

        >>> from graphfit.inspect import xla_report
        >>> text = "\\n".join(["ENTRY %main (a: f32[2]) -> f32[2] {",
        ...                   "  %a = f32[2]{0} parameter(0)",
        ...                   "  ROOT %n = f32[2]{0} negate(%a)", "}"])
        >>> xla_report.parse_hlo(text)["main"].opcodes
        ['parameter', 'negate']
    """

    name: str
    entry: bool
    opcodes: list[str] = dataclasses.field(default_factory=list)
    calls: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    fusion_kinds: list[str] = dataclasses.field(default_factory=list)


def _opcode(rest: str) -> str | None:
    """The opcode after "name = ": skip the shape (a tuple shape is parenthesized)."""
    rest = rest.lstrip()
    if rest.startswith("("):
        depth = 0
        for i, char in enumerate(rest):
            depth += char == "("
            depth -= char == ")"
            if depth == 0:
                rest = rest[i + 1:]
                break
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    match = _OPCODE.match(rest)
    return match.group(1) if match else None


def parse_hlo(text: str) -> dict[str, HloComputation]:
    """Splits HLO module text into computations (name -> `HloComputation`)."""
    computations: dict[str, HloComputation] = {}
    current = None
    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header and not line.startswith("HloModule"):
                current = HloComputation(header.group(2), bool(header.group(1)))
                computations[current.name] = current
            continue
        if line.startswith("}"):
            current = None
            continue
        instruction = _INSTRUCTION.match(line)
        if not instruction:
            continue
        opcode = _opcode(instruction.group(1))
        if opcode is None:
            continue
        current.opcodes.append(opcode)
        for how, target in _CALLS.findall(line):
            for callee in re.findall(r"%?([\w.\-]+)", target):
                current.calls.append((opcode, how, callee))
        if opcode == "fusion":
            kind = _KIND.search(line)
            current.fusion_kinds.append(kind.group(1) if kind else "unknown")
    return computations


def _split(computations: dict[str, HloComputation]) -> tuple[list[str], list[str]]:
    """(computations run at the top level, computations fused into fusion instructions)."""
    entry = [name for name, c in computations.items() if c.entry]
    top, fused = [], []
    queue = [(name, False) for name in entry]
    seen = set()
    while queue:
        name, inside = queue.pop(0)
        if name in seen or name not in computations:
            continue
        seen.add(name)
        (fused if inside else top).append(name)
        for opcode, _, callee in computations[name].calls:
            queue.append((callee, inside or opcode == "fusion"))
    return top, fused


def _counts(opcodes) -> dict[str, int]:
    counter = collections.Counter(opcodes)
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


@dataclasses.dataclass(frozen=True)
class XlaReport:
    """HLO instruction counts before and after XLA's passes, and the fusions XLA made.

    Attributes:
        before: {opcode: count} over every computation of the unoptimized module.
        after: {opcode: count} of the top-level instructions of the optimized module (the
            entry and what it calls outside fusions); each fusion counts once.
        fusions: {fusion kind: count}, e.g. {"kLoop": 42}.
        fused: {opcode: count} of the instructions inside the fused computations.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.inspect import xla_report
        >>> f = tf.function(lambda x: tf.exp(x) * 2.0, jit_compile=True)
        >>> report = xla_report.xla_report(f, tf.TensorSpec([4]))
        >>> report.after, report.fusions
        ({'fusion': 1, 'parameter': 1}, {'kLoop': 1})
    """

    before: dict[str, int]
    after: dict[str, int]
    fusions: dict[str, int]
    fused: dict[str, int]

    @property
    def instructions_before(self) -> int:
        return sum(self.before.values())

    @property
    def instructions_after(self) -> int:
        return sum(self.after.values())

    @property
    def fused_instructions(self) -> int:
        return sum(self.fused.values())

    @property
    def fusion_count(self) -> int:
        return sum(self.fusions.values())

    def lines(self, top: int = 8) -> list[str]:
        """The report as text lines (no indentation)."""
        fusions = ", ".join(f"{kind} {count}" for kind, count in self.fusions.items()) or "none"
        return [
            f"HLO before XLA's passes: {self.instructions_before} instructions "
            f"({_top(self.before, top)})",
            f"HLO after XLA's passes: {self.instructions_after} top-level instructions "
            f"({_top(self.after, top)})",
            f"fusions: {self.fusion_count} ({fusions}), holding {self.fused_instructions} "
            f"instructions",
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _top(counts: dict[str, int], n: int) -> str:
    items = list(counts.items())
    text = ", ".join(f"{op} {count}" for op, count in items[:n])
    return text + (", ..." if len(items) > n else "")


def from_hlo(unoptimized: str, optimized: str) -> XlaReport:
    """An `XlaReport` from the two HLO texts of one module."""
    before = parse_hlo(unoptimized)
    after = parse_hlo(optimized)
    top, fused = _split(after)
    kinds = collections.Counter(k for name in top for k in after[name].fusion_kinds)
    return XlaReport(
        before=_counts(op for c in before.values() for op in c.opcodes),
        after=_counts(op for name in top for op in after[name].opcodes),
        fusions=dict(kinds.most_common()),
        fused=_counts(op for name in fused for op in after[name].opcodes),
    )


def compiler_ir(function, *args, **kwargs):
    """`function.experimental_get_compiler_ir` on concrete values: TensorSpecs with a full
    shape become zeros (the IR depends on shapes and dtypes only; nothing is run)."""
    import tensorflow as tf

    def concrete(value):
        if isinstance(value, tf.TensorSpec):
            if not value.shape.is_fully_defined():
                raise ValueError(
                    f"XLA compiles for fixed shapes; got an input of shape {value.shape}. Give "
                    f"a batch size (or example tensors) to see the XLA report."
                )
            return tf.zeros(value.shape, value.dtype)
        return value

    args, kwargs = tf.nest.map_structure(concrete, (args, kwargs))
    return function.experimental_get_compiler_ir(*args, **kwargs)


def xla_report(function, *args, **kwargs) -> XlaReport:
    """The `XlaReport` of a `tf.function(..., jit_compile=True)` for these inputs.

    Args:
        function: the jit-compiled `tf.function`.
        *args, **kwargs: its inputs: tensors, Python values, or fully defined TensorSpecs.

    Raises:
        ValueError: when the function is not marked `jit_compile=True` (TensorFlow's message),
            or an input spec has an unknown dimension.
    """
    ir = compiler_ir(function, *args, **kwargs)
    # XLA compiles once: stage "hlo" is only TensorFlow's lowering to HLO (no XLA pass runs;
    # about a seventh of the time of "optimized_hlo", which compiles). Each call returns one
    # text, and no stage returns both.
    return from_hlo(ir(stage="hlo"), ir(stage="optimized_hlo"))
