"""`graphfit export --format/--serving-dir` options and `graphfit serve`.

    graphfit export RUN [--format saved_model|tflite|onnx] [--quantize float16|dynamic_range]
                        [--output PATH | --serving-dir DIR [--name NAME]]
    graphfit serve RUN|EXPORT_DIR [--name NAME] [--host 127.0.0.1] [--port 8501]
                   [--no-batching] [--max-batch-rows 64] [--batch-delay-ms 2] ...
"""

from __future__ import annotations

import argparse

__all__ = ["add_export_arguments", "add_serve_arguments", "export", "serve"]

# graphfit.export.formats's FORMATS and QUANTIZATIONS (importing it imports TensorFlow, which
# the command line's parser must not; a test checks they agree).
FORMATS = ("saved_model", "tflite", "onnx")
QUANTIZATIONS = ("float16", "dynamic_range")


def add_export_arguments(command: argparse.ArgumentParser) -> None:
    """The export formats' options of `graphfit export`."""
    command.add_argument("--format", default="saved_model", choices=FORMATS,
                         help="what to write (default saved_model); each export is checked "
                              "against graphfit's predictions in its own runtime")
    command.add_argument("--quantize", default=None, choices=QUANTIZATIONS,
                         help="tflite only: post-training float16 or dynamic-range (int8 "
                              "weights) quantization")
    command.add_argument("--serving-dir", default=None, metavar="DIR",
                         help="write DIR/NAME/<next version>/ (TF Serving's layout) with a "
                              "warm-up file, instead of --output")
    command.add_argument("--name", default=None,
                         help="the model's name under --serving-dir (default: the recipe's)")
    command.add_argument("--sample", default=None, metavar="FILE.npz",
                         help="raw rows to check the export with, one array per input name "
                              "(default: 32 synthetic rows; needed for string inputs)")


def add_serve_arguments(command: argparse.ArgumentParser) -> None:
    """`graphfit serve`'s options."""
    command.add_argument("source", metavar="RUN|EXPORT_DIR",
                         help="a finished run, a SavedModel folder, or a model folder with "
                              "numbered versions (graphfit export --serving-dir DIR/NAME)")
    command.add_argument("--name", default=None, help="the model's name in the URLs")
    command.add_argument("--host", default="127.0.0.1",
                         help="address to bind (default 127.0.0.1: this machine only)")
    command.add_argument("--port", type=int, default=8501, help="default 8501, as TF Serving")
    command.add_argument("--no-batching", dest="batching", action="store_false",
                         help="run each request on its own")
    command.add_argument("--max-batch-rows", type=int, default=64,
                         help="the most rows in one batched call (default 64)")
    command.add_argument("--batch-delay-ms", type=float, default=0.0,
                         help="how long a request waits for others to batch with (default 0: "
                              "a batch is what queued while the previous batch ran)")
    command.add_argument("--max-request-rows", type=int, default=1024,
                         help="refuse requests with more rows (413; default 1024)")
    command.add_argument("--max-body-bytes", type=int, default=8 << 20,
                         help="refuse larger request bodies (413; default 8 MiB)")
    command.add_argument("--poll-seconds", type=float, default=1.0,
                         help="look for a newer version folder this often (0: never)")


def export(args, run: str) -> str:
    """Runs `graphfit export` with its format options; returns what to print."""
    from graphfit.export.run_export import export_run_as

    sample = None
    if args.sample is not None:
        import numpy as np

        try:
            with np.load(args.sample, allow_pickle=False) as arrays:
                sample = {name: arrays[name] for name in arrays.files}
        except (OSError, ValueError) as error:
            raise ValueError(f"--sample {args.sample}: cannot read it as .npz ({error})") \
                from None
    check = export_run_as(run, args.output, format=args.format, quantize=args.quantize,
                          serving_dir=args.serving_dir, name=args.name, layers=args.layers,
                          sample=sample)
    return f"exported {run} to {check.path}\n{check}"


def serve(args) -> None:
    """Runs `graphfit serve` until interrupted."""
    from graphfit.serve import ModelServer, ServeOptions

    options = ServeOptions(
        host=args.host, port=args.port, batching=args.batching,
        max_batch_rows=args.max_batch_rows, batch_delay_ms=args.batch_delay_ms,
        max_request_rows=args.max_request_rows, max_body_bytes=args.max_body_bytes,
        poll_s=args.poll_seconds, freeze_gc=True)
    server = ModelServer(args.source, args.name, options)
    if server.export_check is not None:
        print(server.export_check)
    model = server.model
    batching = (f"batching up to {options.max_batch_rows} rows within "
                f"{options.batch_delay_ms:g} ms" if options.batching else "no batching")

    def started(url):
        print(f"serving {model.name!r} version {model.current.version} from {model.path} at "
              f"{url}/v1/models/{model.name} ({batching}; /metrics for counts and latencies; "
              f"Ctrl-C stops)", flush=True)

    server.serve_forever(started)
