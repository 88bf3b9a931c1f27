"""Tables with typed columns: reading CSV / JSON lines / Parquet, inferring column types, and
preprocessing them with Keras preprocessing layers adapted on the training split only.

    from graphfit import tabular
    table = tabular.read_table("churn.csv")
    columns = tabular.feature_columns(table, {"country": {"type": "categorical"}},
                                      target="churn")
    prep = tabular.TablePreprocessor(columns)
    prep.adapt(train_dataset)                 # a tf.data.Dataset of raw column dicts
    dataset = dataset.map(lambda row, y: (prep.transform(row), y))

A recipe names it `data: {source: table, path: ..., target: ..., columns: {...}}` (and
`source: text_folder`); see the README's "Your own data: tables with types".
"""

import importlib

# public name -> module; loaded on first use (PEP 562), so that reading a recipe (which needs
# only the formats and column types) does not import TensorFlow.
_LAZY = {
    **dict.fromkeys(("MISSING", "TYPES", "Column", "TableError", "infer_type", "raw_values"),
                    "graphfit.tabular.columns"),
    **dict.fromkeys(("FEATURES", "TablePreprocessor"), "graphfit.tabular.preprocessor"),
    **dict.fromkeys(("FORMATS", "Table", "read_table", "table_format"),
                    "graphfit.tabular.readers"),
    **dict.fromkeys(("LABEL", "TEXT", "describe", "feature_columns", "read_text_folder"),
                    "graphfit.tabular.schema"),
    **dict.fromkeys(("ClassNames", "balanced_class_weight", "split_indices"),
                    "graphfit.tabular.targets"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'graphfit.tabular' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__():
    return __all__
