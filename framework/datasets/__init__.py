"""Data sets: the ones shipped with graphfit (digits, breast cancer), seeded synthetic
generators (points, curves, noisy-sine forecasting windows, and graphs of eight structural
classes as a `GraphSet`), CSV / .npz loaders, and `Stream`s of CSV, TFRecord or Parquet
shards larger than memory (`write_tfrecord_shards` / `write_parquet_shards` convert arrays).

    >>> import graphfit as gf
    >>> x, y = gf.datasets.load_digits()
    >>> x.shape, y.shape
    ((1797, 64), (1797,))
"""

from graphfit.datasets.graph_set import GraphSet as GraphSet
from graphfit.datasets.graphs import GRAPH_CLASSES as GRAPH_CLASSES
from graphfit.datasets.graphs import make_graph_classes as make_graph_classes
from graphfit.datasets.image_folder import ImageFolder as ImageFolder
from graphfit.datasets.image_folder import read_image_folder as read_image_folder
from graphfit.datasets.loaders import *  # noqa: F401,F403  (the loaders' __all__)
from graphfit.datasets.loaders import __all__ as _loaders_all
from graphfit.datasets.parquet_shards import write_parquet_shards as write_parquet_shards
from graphfit.datasets.stream_shards import worker_shards as worker_shards
from graphfit.datasets.streams import BadRecordError as BadRecordError
from graphfit.datasets.streams import Stream as Stream
from graphfit.datasets.streams import write_csv_shards as write_csv_shards
from graphfit.datasets.streams import write_tfrecord_shards as write_tfrecord_shards
from graphfit.datasets.synthetic import make_blobs as make_blobs
from graphfit.datasets.synthetic import make_moons as make_moons
from graphfit.datasets.synthetic import make_sinc as make_sinc
from graphfit.datasets.synthetic import make_sine_sequences as make_sine_sequences
from graphfit.datasets.synthetic import make_spirals as make_spirals
from graphfit.datasets.timeseries import TimeSeries as TimeSeries
from graphfit.datasets.timeseries import read_timeseries as read_timeseries

__all__ = sorted({*_loaders_all, "make_blobs", "make_moons", "make_sinc", "make_sine_sequences",
                  "make_spirals", "make_graph_classes", "GRAPH_CLASSES", "GraphSet",
                  "ImageFolder", "read_image_folder", "TimeSeries", "read_timeseries",
                  "Stream", "BadRecordError", "write_tfrecord_shards", "write_csv_shards",
                  "write_parquet_shards", "worker_shards"})
