"""graphfit: a Keras-style training framework on TensorFlow 2 (bootstrap)."""
from graphfit.layer import InputSpec, Layer
from graphfit.registry import register_layer
