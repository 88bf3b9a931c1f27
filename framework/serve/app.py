"""The HTTP side of `graphfit serve`: TensorFlow Serving's REST API on Starlette.

- `GET /v1/models/NAME` (and `/versions/N`): the version status, as TF Serving answers it;
- `GET /v1/models/NAME/metadata`: the signatures, their inputs and outputs, the column names;
- `POST /v1/models/NAME:predict` (and `/versions/N:predict`): `{"instances": [...]}` rows
  (values, or dicts by input or column name, strings and numbers) answered as
  `{"predictions": [...]}`, or `{"inputs": ...}` columns answered as `{"outputs": ...}`, with
  an optional `signature_name`;
- `GET /metrics`: request counts and latencies (Prometheus's text format).

A bad request (malformed JSON, a missing or unknown input or column, wrong shapes or types,
an unknown signature, too many rows or bytes) is answered with a 4xx status and
`{"error": "what was wrong"}`, and the server goes on serving.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np

from graphfit.export.serving import decode_arrays, request_body
from graphfit.serve.batching import rows_of

__all__ = ["HTTPProblem", "create_app", "answer_body", "run_in"]


class HTTPProblem(Exception):
    """A request answered with a 4xx status and `{"error": message}`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _plain(array: np.ndarray):
    values = np.asarray(array).tolist()
    if np.asarray(array).dtype.kind not in "OS":
        return values

    def decode(value):
        if isinstance(value, list):
            return [decode(v) for v in value]
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    return decode(values)


def answer_body(outputs: dict, row_format: bool) -> dict:
    """TF Serving's answer: `predictions` (one entry per row; a dict of the outputs when
    there are several) for the row format, `outputs` for the columnar one."""
    if not row_format:
        if len(outputs) == 1:
            return {"outputs": _plain(next(iter(outputs.values())))}
        return {"outputs": {k: _plain(v) for k, v in outputs.items()}}
    if len(outputs) == 1:
        return {"predictions": _plain(next(iter(outputs.values())))}
    columns = {k: _plain(v) for k, v in outputs.items()}
    rows = len(next(iter(columns.values())))
    return {"predictions": [{k: v[i] for k, v in columns.items()} for i in range(rows)]}


def _route(rest: str) -> tuple[str, int | None, str]:
    """(model name, version or None, action: status | metadata | predict) of a path."""
    verb = ""
    if ":" in rest:
        rest, verb = rest.rsplit(":", 1)
        if verb != "predict":
            raise HTTPProblem(404, f"':{verb}' is not served here: POST :predict (TF "
                                   f"Serving's classify and regress take tf.Example protos)")
    parts = rest.strip("/").split("/")
    version = None
    if len(parts) >= 3 and parts[1] == "versions":
        if not parts[2].isdigit():
            raise HTTPProblem(400, f"version {parts[2]!r} is not a number")
        version = int(parts[2])
        parts = [parts[0], *parts[3:]]
    if verb:
        if len(parts) != 1:
            raise HTTPProblem(404, f"no such endpoint: /v1/models/{rest}:{verb}")
        return parts[0], version, "predict"
    if parts[1:] in ([], ["metadata"]):
        return parts[0], version, "metadata" if parts[1:] else "status"
    raise HTTPProblem(404, f"no such endpoint: /v1/models/{rest}")


async def _read(request, limit: int) -> dict:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPProblem(413, f"the request body has {declared} bytes; this server takes "
                               f"at most {limit} (--max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPProblem(413, f"the request body is over {limit} bytes, the most this "
                                   f"server takes (--max-body-bytes)")
        chunks.append(chunk)
    try:
        return request_body(b"".join(chunks))
    except ValueError as error:
        raise HTTPProblem(400, str(error)) from None


def create_app(server):
    """The Starlette application of a `ModelServer` (see `graphfit.serve.server`)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    def json_response(body: dict, status: int = 200):
        return Response(json.dumps(body), status_code=status, media_type="application/json")

    async def models(request):
        started = time.perf_counter()
        action, status = "status", 200
        try:
            name, version, action = _route(request.path_params["rest"])
            if (request.method == "POST") != (action == "predict"):
                raise HTTPProblem(405, f"{request.method} is not allowed here: GET the status "
                                       f"or metadata, POST :predict")
            model = server.model_named(name)
            if action == "predict":
                body = await predict(model, version, request)
            elif action == "metadata":
                body = model.metadata()
            else:
                try:
                    body = model.status(version)
                except KeyError:
                    raise HTTPProblem(404, f"model {name!r} has no version {version}") from None
        except HTTPProblem as problem:
            status, body = problem.status, {"error": problem.message}
        server.metrics.record(action, status, time.perf_counter() - started)
        return json_response(body, status)

    async def predict(model, version, request) -> dict:
        body = await _read(request, server.options.max_body_bytes)
        current = model.current
        if version is not None and version != current.version:
            raise HTTPProblem(404, f"model {model.name!r} version {version} is not loaded "
                                   f"(version {current.version} is)")
        signature = body.get("signature_name", "serving_default")
        if signature not in current.signatures:
            raise HTTPProblem(400, f"the model has no signature {signature!r} (it has "
                                   f"{', '.join(sorted(current.signatures))})")
        try:
            arrays = decode_arrays(body, current.specs[signature], current.feature_names,
                                   current.missing_allowed)
        except ValueError as error:
            raise HTTPProblem(400, str(error)) from None
        rows = rows_of(arrays)
        if rows > server.options.max_request_rows:
            raise HTTPProblem(413, f"the request has {rows} rows; this server takes at most "
                                   f"{server.options.max_request_rows} per request "
                                   f"(--max-request-rows)")
        try:
            outputs = await server.run(current, signature, arrays)
        except Exception as error:  # TensorFlow refused the values (InvalidArgumentError)
            raise HTTPProblem(400, f"the model could not run on these values: "
                                   f"{op_message(error)}") from None
        return answer_body(outputs, "instances" in body)

    async def metrics(request):
        return PlainTextResponse(server.metrics.text(server.gauges()))

    async def not_found(request, exc):
        return JSONResponse({"error": f"no such endpoint: {request.url.path}"},
                            status_code=getattr(exc, "status_code", 404))

    routes = [Route("/v1/models/{rest:path}", models, methods=["GET", "POST"]),
              Route("/metrics", metrics, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


def op_message(error: Exception) -> str:
    """The line of a TensorFlow error that says what was wrong: not "Graph execution
    error:", the node's traceback or its [[node ...]] line."""
    in_traceback = False
    for line in str(getattr(error, "message", error)).splitlines():
        if line.startswith("Detected at node"):
            in_traceback = True  # the indented lines after it are where the node was made
            continue
        if in_traceback and (line[:1].isspace() or not line):
            continue
        in_traceback = False
        text = line.strip()
        if text and text != "Graph execution error:" and not text.startswith("[["):
            return text
    return repr(error)


async def run_in(executor, function, *args):
    """`function(*args)` in `executor`, awaited."""
    return await asyncio.get_running_loop().run_in_executor(executor, function, *args)
