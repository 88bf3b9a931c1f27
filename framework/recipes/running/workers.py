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

import os
import re

import tensorflow as tf

from graphfit.recipes.running import distribution

__all__ = ["COLLECTIVE_ERRORS", "WorkerLost", "peers_named", "lost_worker_message",
           "own_role", "notice"]

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


__all__ += ["shown_run"]
