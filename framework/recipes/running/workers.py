"""A recipe trained by several workers (`distribute: {strategy: multi_worker}`).

Every worker runs `graphfit train` with the same recipe and its own TF_CONFIG. The chief
(task type "chief", or worker 0 when the cluster has none) claims and writes the run
directory; the other workers run the same steps, evaluations and callbacks (they take part in
every collective) and write nothing. When a worker dies, TensorFlow's collectives fail on the
others (at once when its connections drop, within about 10 seconds by the cluster's
heartbeats when it stops answering, or after `distribute.timeout` seconds when a step waits
that long); `lost_worker_message` turns that error into what to do next.

Example:

    >>> peers_named("Collective ops is aborted by: /job:worker/replica:0/task:1 is down",
    ...             exclude=("worker", 0))
    ['worker 1']
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import tensorflow as tf

from graphfit.recipes.reading.problems import Problem, RecipeError
from graphfit.recipes.running import distribution
from graphfit.training.distribution import is_multi_worker

__all__ = ["COLLECTIVE_ERRORS", "WorkerLost", "peers_named", "lost_worker_message",
           "own_role", "notice", "training_fingerprint", "check_same_training"]

# What a collective raises when a peer is gone (connection reset, heartbeats stopped, the
# cluster aborted its collectives) or a step waited longer than `distribute.timeout`.
COLLECTIVE_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                     tf.errors.CancelledError, tf.errors.AbortedError)
_PEER = re.compile(r"/job:(chief|worker)(?:/replica:\d+)?/task:(\d+)")


class WorkerLost(RuntimeError):
    """Training under several workers stopped because a worker failed (exit code 1)."""


def own_role(strategy) -> tuple[str, int] | None:
    """(task type, index) of this process in the cluster, or None outside one."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return None
    return resolver.task_type, int(resolver.task_id)


def peers_named(message: str, exclude=None) -> list[str]:
    """The other tasks a TensorFlow error message names ("worker 1"), first mention first."""
    found = []
    for job, index in _PEER.findall(message):
        if (job, int(index)) != exclude and f"{job} {index}" not in found:
            found.append(f"{job} {index}")
    return found


def lost_worker_message(error: Exception, strategy, run: str, resume_run: str,
                        epochs_saved: int | None) -> str:
    """What happened, which worker likely failed, what is intact, and the command to resume.

    Args:
        error: the TensorFlow error a collective raised.
        strategy: this process's MultiWorkerMirroredStrategy.
        run: the run directory as this worker knows it (for the checkpoints).
        resume_run: the run directory to name in the resume command.
        epochs_saved: epochs covered by the newest intact checkpoint (None: unknown here,
            0: none written yet).
    """
    text = getattr(error, "message", None) or str(error)
    me = own_role(strategy)
    peers = peers_named(text, exclude=me)
    who = (f"{' or '.join(peers)} likely failed" if peers
           else "another worker failed or stopped answering")
    if isinstance(error, tf.errors.DeadlineExceededError):
        who = ("a step waited longer than distribute.timeout for the other workers: one of "
               "them is stuck, failed, or far slower")
    reason = _reason(text) or type(error).__name__
    head = (f"training stopped on {distribution.describe_worker(strategy)}: {who} "
            f"(TensorFlow: {type(error).__name__}: {reason}). ")
    if epochs_saved == 0:
        return head + ("No checkpoint was written yet (no epoch finished): start every worker "
                       "again with its TF_CONFIG and the same graphfit train command, with a "
                       "new --run-dir")
    saved = (f"The chief's checkpoints in {run} are intact up to its last finished epoch"
             if epochs_saved is None else
             f"The checkpoints are intact up to epoch {epochs_saved}")
    return head + (f"{saved}. To continue, start every worker again with its TF_CONFIG and: "
                   f"graphfit train --resume {resume_run}")


_CAUSE = re.compile(r"refused|reset by peer|heartbeat|unhealthy|timed out|deadline|is down|"
                    r"aborted|unavailable", re.IGNORECASE)


def _reason(text: str) -> str:
    """The line of a TensorFlow error that says what happened (not "Graph execution error")."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if _CAUSE.search(line) and not line.startswith(("Detected at", "File ")):
            return line[:200]
    return lines[0][:200] if lines else ""


def notice(strategy, run_dir: str | None) -> str:
    """The one line a worker other than the chief prints when it starts training."""
    where = f" ({run_dir})" if run_dir else ""
    return (f"graphfit: {distribution.describe_worker(strategy)}: training with the cluster; "
            f"the chief prints progress and writes the run directory{where}")


def shown_run(run: str | None) -> str:
    """The run directory for messages: as given, else a placeholder the user fills in."""
    return os.path.abspath(run) if run else "RUN_DIR (the chief's run directory)"


__all__ += ["shown_run", "input_context"]


def input_context(strategy):
    """This worker's `tf.distribute.InputContext` under several workers, as
    `strategy.distribute_datasets_from_function` makes it (one input pipeline per worker,
    the chief first, then the workers by index), or None with one worker or none."""
    if not is_multi_worker(strategy) or not getattr(strategy.cluster_resolver, "task_type",
                                                    None):
        return None
    resolver = strategy.cluster_resolver
    jobs = resolver.cluster_spec().as_dict()
    chiefs = len(jobs.get("chief", []))
    pipelines = chiefs + len(jobs.get("worker", []))
    if pipelines < 2:
        return None
    index = int(resolver.task_id) + (chiefs if resolver.task_type == "worker" else 0)
    return tf.distribute.InputContext(pipelines, index, strategy.num_replicas_in_sync)


def training_fingerprint(config: dict, splits, initial_epoch: int) -> int:
    """A number that differs when two workers would not run the same steps: the resolved
    recipe (less `distribute` and `run_dir`; a file path counts by its file name, as the
    same data may lie in another folder on each machine) with each split's shape, and the
    epoch training starts from."""
    shapes = {}
    for stage in ("train", "val", "test"):
        pair = getattr(splits, stage)
        if isinstance(pair, tuple):
            shapes[stage] = [list(getattr(part, "shape", ())) for part in pair]
    described = {"recipe": _without_folders({key: value for key, value in config.items()
                                             if key not in ("distribute", "run_dir")}),
                 "data": shapes, "initial_epoch": initial_epoch}
    text = json.dumps(described, sort_keys=True, default=str)
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:15], 16)  # fits int64


def _without_folders(value):
    """`value` with every absolute path replaced by its last part (the recipe resolves the
    data paths, a base run's folder, ... against its own folder)."""
    if isinstance(value, dict):
        return {key: _without_folders(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_folders(item) for item in value]
    if isinstance(value, str) and os.path.isabs(value):
        return os.path.basename(os.path.normpath(value))
    return value


def check_same_training(recipe, splits, strategy, initial_epoch: int) -> None:
    """Under several workers: stops every worker, before any step, when one was given
    another recipe, other `--set` overrides, other data or another checkpoint than the
    chief (their steps' collectives would not match, and TensorFlow's error says only that
    two tensor shapes differ). Two collectives: the chief's fingerprint to all, then how
    many disagree. Nothing happens outside a cluster.

    Raises:
        RecipeError: on every worker, the one that differs and the others.
    """
    if not is_multi_worker(strategy):
        return
    own = training_fingerprint(recipe.config, splits, initial_epoch)

    def chief_only(context):
        return tf.constant(own if context.replica_id_in_sync_group == 0 else 0, tf.int64)

    def disagrees(context):
        return tf.constant(int(own != chiefs), tf.int64)

    chiefs = _summed(strategy, chief_only)
    differing = _summed(strategy, disagrees)
    if not differing:
        return
    if own != chiefs:
        message = ("this worker's recipe, --set overrides, data or checkpoint differ from "
                   "the chief's")
    else:
        message = (f"{differing} replica(s) of other workers were given another recipe, "
                   f"--set overrides, data or checkpoint than the chief's")
    raise RecipeError([Problem(("distribute",), (
        f"{message}: every worker must run `graphfit train` with the same recipe, overrides "
        f"and data (only TF_CONFIG differs). No worker trained."),
        recipe.position(("distribute",)))])


def _summed(strategy, value_of) -> int:
    values = strategy.experimental_distribute_values_from_function(value_of)
    return int(strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None))
