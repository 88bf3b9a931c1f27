"""Optuna's log of a trial failure that graphfit has already explained.

When an objective raises, Optuna logs "Trial N failed with parameters ... because of the
following error" with the whole traceback, then "Trial N failed with value None". For a
failure that is the user's to fix (a recipe error at that point, a loss that turned NaN)
the study has already printed one line that says why, and `trials.csv` and the summary keep
it: the traceback is noise that buries it. `quiet_failure(number)` drops Optuna's two
records of that trial; a failure graphfit did not expect (a bug) keeps them.

Example:

    >>> import logging
    >>> quiet_failure(7)
    >>> record = logging.LogRecord(OPTUNA_LOGGER, logging.WARNING, "", 0,
    ...                            "Trial 7 failed with value None.", None, None)
    >>> logging.getLogger(OPTUNA_LOGGER).filters[0].filter(record)
    False
"""

from __future__ import annotations

import logging
import re

__all__ = ["quiet_failure", "OPTUNA_LOGGER"]

OPTUNA_LOGGER = "optuna.study._optimize"  # where Optuna logs a failed trial
_TRIAL = re.compile(r"Trial (\d+) failed")


class _ExplainedFailures(logging.Filter):
    def __init__(self):
        super().__init__()
        self.numbers: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        found = _TRIAL.match(str(record.msg))
        return not (found and int(found.group(1)) in self.numbers)


_FILTER = _ExplainedFailures()


def quiet_failure(number: int) -> None:
    """Drops Optuna's failure records of trial `number` (its failure is explained already)."""
    logger = logging.getLogger(OPTUNA_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    _FILTER.numbers.add(int(number))
