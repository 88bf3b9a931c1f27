"""Request counts and latencies of the server, in Prometheus's text format (`GET /metrics`).

Example:

    >>> metrics = Metrics()
    >>> metrics.record("predict", 200, 0.004)
    >>> metrics.record("predict", 400, 0.001)
    >>> 'graphfit_requests_total{endpoint="predict",code="400"} 1' in metrics.text({})
    True
"""

from __future__ import annotations

import collections
import threading

import numpy as np

__all__ = ["Metrics"]

WINDOW = 10_000  # the latencies quantiles are computed over: the latest requests


class Metrics:
    """Counts by (endpoint, status code) and latencies by endpoint (seconds)."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self.latency_sum: collections.Counter = collections.Counter()
        self.latencies: dict[str, collections.deque] = {}
        self._lock = threading.Lock()

    def record(self, endpoint: str, code: int, seconds: float) -> None:
        """Counts one answered request."""
        with self._lock:
            self.counts[(endpoint, code)] += 1
            self.latency_sum[endpoint] += seconds
            self.latencies.setdefault(endpoint, collections.deque(maxlen=WINDOW)).append(
                seconds)

    def quantiles(self, endpoint: str) -> dict[str, float]:
        """p50 and p99 latency (seconds) of the latest requests to `endpoint`."""
        with self._lock:
            values = np.array(self.latencies.get(endpoint, ()), np.float64)
        if values.size == 0:
            return {"0.5": 0.0, "0.99": 0.0}
        return {"0.5": float(np.quantile(values, 0.5)),
                "0.99": float(np.quantile(values, 0.99))}

    def text(self, gauges: dict[str, float]) -> str:
        """The Prometheus exposition text, with `gauges` ({name: value}) added."""
        lines = ["# TYPE graphfit_requests_total counter"]
        with self._lock:
            counts = sorted(self.counts.items())
            sums = dict(self.latency_sum)
        for (endpoint, code), count in counts:
            lines.append(f'graphfit_requests_total{{endpoint="{endpoint}",code="{code}"}} '
                         f"{count}")
        lines.append("# TYPE graphfit_request_latency_seconds summary")
        for endpoint in sorted(sums):
            for q, value in self.quantiles(endpoint).items():
                lines.append(f'graphfit_request_latency_seconds{{endpoint="{endpoint}",'
                             f'quantile="{q}"}} {value:.6f}')
            total = sum(c for (e, _), c in counts if e == endpoint)
            lines.append(f'graphfit_request_latency_seconds_sum{{endpoint="{endpoint}"}} '
                         f"{sums[endpoint]:.6f}")
            lines.append(f'graphfit_request_latency_seconds_count{{endpoint="{endpoint}"}} '
                         f"{total}")
        for name, value in gauges.items():
            lines.append(f"# TYPE {name} gauge")
            lines.append(f"{name} {value}")
        return "\n".join(lines) + "\n"
