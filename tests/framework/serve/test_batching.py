"""The batcher: concurrent requests of the same version, signature and shapes share a call;
others, outputs without one row per input row, and a request whose values fail, answer each
for their own."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from graphfit.serve import Batcher


def _gather(batcher, requests):
    async def main():
        answers = await asyncio.gather(*[batcher.submit(*r) for r in requests],
                                       return_exceptions=True)
        await batcher.close()
        return answers

    return asyncio.run(main())


def test_compatible_requests_share_a_call_and_get_their_own_rows():
    calls = []

    def run(version, signature, arrays):
        calls.append(len(arrays["x"]))
        return {"outputs": arrays["x"] * 10}

    batcher = Batcher(run, max_rows=5, delay_s=0.05)
    requests = [("v1", "serving_default", {"x": np.full((2, 1), float(i))}) for i in range(4)]
    requests.append(("v1", "classify", {"x": np.ones((1, 1))}))
    requests.append(("v1", "serving_default", {"x": np.ones((1, 3))}))
    answers = _gather(batcher, requests)
    for i in range(4):
        np.testing.assert_array_equal(answers[i]["outputs"], np.full((2, 1), 10.0 * i))
    assert max(calls) <= 5 and len(calls) < len(requests) and sum(calls) == 10


def test_outputs_not_by_row_are_run_request_by_request():
    def run(version, signature, arrays):
        return {"total": np.sum(arrays["x"], keepdims=True).reshape(1)}

    answers = _gather(Batcher(run, max_rows=8, delay_s=0.05),
                      [(None, "s", {"x": np.full((2,), float(i))}) for i in range(3)])
    assert [float(a["total"][0]) for a in answers] == [0.0, 2.0, 4.0]


def test_a_failing_request_does_not_fail_the_others():
    def run(version, signature, arrays):
        if np.any(arrays["x"] < 0):
            raise ValueError("negative")
        return {"outputs": arrays["x"]}

    answers = _gather(Batcher(run, max_rows=8, delay_s=0.05),
                      [(None, "s", {"x": np.array([[v]])}) for v in (1.0, -1.0, 2.0)])
    assert isinstance(answers[1], ValueError)
    assert float(answers[0]["outputs"][0, 0]) == 1.0 and float(answers[2]["outputs"][0, 0]) == 2.0


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="max_rows=0"):
        Batcher(lambda *a: {}, max_rows=0)
    with pytest.raises(ValueError, match="delay_s=-1"):
        Batcher(lambda *a: {}, delay_s=-1)


def test_graph_batches_are_not_concatenated(tmp_path):
    """A signature with a graph batch's index inputs (graph_index numbers nodes within one
    request) runs request by request."""
    import tensorflow as tf

    from graphfit.serve import ModelVersion

    class Pool(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="node_features"),
                                      tf.TensorSpec([None], tf.int32, name="graph_index")])
        def serve(self, node_features, graph_index):
            return {"outputs": tf.math.unsorted_segment_sum(
                node_features, graph_index, tf.reduce_max(graph_index) + 1)}

    module = Pool()
    tf.saved_model.save(module, str(tmp_path / "pool"),
                        signatures={"serving_default": module.serve})
    assert ModelVersion(str(tmp_path / "pool"), 1).batchable == {"serving_default": False}
