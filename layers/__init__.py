"""graphfit's layer library: Keras names, signatures and defaults, on graphfit's `Layer`.

Every layer here is registered by its class name, so recipes reach it as `type: Dense`.
"""

from graphfit.layers.activation import Activation
from graphfit.layers.attention import MultiHeadAttention
from graphfit.layers.batch_normalization import BatchNormalization
from graphfit.layers.black_box import BlackBox
from graphfit.layers.center_loss import CenterLoss
from graphfit.layers.class_means import ClassMeans
from graphfit.layers.conv_transpose import Conv1DTranspose, Conv2DTranspose, Conv3DTranspose
from graphfit.layers.convolutional import Conv1D, Conv2D, Conv3D
from graphfit.layers.dense import Dense
from graphfit.layers.depthwise_conv import (
    DepthwiseConv1D,
    DepthwiseConv2D,
    SeparableConv1D,
    SeparableConv2D,
)
from graphfit.layers.dropout import (
    Dropout,
    GaussianDropout,
    GaussianNoise,
    SpatialDropout1D,
    SpatialDropout2D,
    SpatialDropout3D,
)
from graphfit.layers.embedding import Embedding
from graphfit.layers.formula import Formula
from graphfit.layers.gin_conv import GINConv
from graphfit.layers.gradient_hook import GradientHook
from graphfit.layers.keras_layer import KerasLayer
from graphfit.layers.layer_normalization import LayerNormalization
from graphfit.layers.merging import Add, Concatenate
from graphfit.layers.operations import TensorOperation
from graphfit.layers.pooling import (
    AveragePooling1D,
    AveragePooling2D,
    AveragePooling3D,
    GlobalAveragePooling1D,
    GlobalAveragePooling2D,
    GlobalAveragePooling3D,
    GlobalMaxPooling1D,
    GlobalMaxPooling2D,
    GlobalMaxPooling3D,
    MaxPooling1D,
    MaxPooling2D,
    MaxPooling3D,
)
from graphfit.layers.recurrent import GRU, LSTM
from graphfit.layers.rescaling import Rescaling
from graphfit.layers.reshaping import (
    Cropping1D,
    Cropping2D,
    Cropping3D,
    Flatten,
    Reshape,
    UpSampling1D,
    UpSampling2D,
    UpSampling3D,
    ZeroPadding1D,
    ZeroPadding2D,
    ZeroPadding3D,
)
from graphfit.layers.segment_pooling import SegmentPooling

__all__ = [
    "Activation",
    "Add",
    "AveragePooling1D",
    "AveragePooling2D",
    "AveragePooling3D",
    "BatchNormalization",
    "BlackBox",
    "CenterLoss",
    "ClassMeans",
    "Concatenate",
    "Conv1D",
    "Conv1DTranspose",
    "Conv2D",
    "Conv2DTranspose",
    "Conv3D",
    "Conv3DTranspose",
    "Cropping1D",
    "Cropping2D",
    "Cropping3D",
    "Dense",
    "DepthwiseConv1D",
    "DepthwiseConv2D",
    "Dropout",
    "Embedding",
    "Flatten",
    "Formula",
    "GINConv",
    "GRU",
    "GaussianDropout",
    "GaussianNoise",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "GlobalAveragePooling3D",
    "GlobalMaxPooling1D",
    "GlobalMaxPooling2D",
    "GlobalMaxPooling3D",
    "GradientHook",
    "KerasLayer",
    "LSTM",
    "LayerNormalization",
    "MaxPooling1D",
    "MaxPooling2D",
    "MaxPooling3D",
    "MultiHeadAttention",
    "Rescaling",
    "Reshape",
    "SegmentPooling",
    "SeparableConv1D",
    "SeparableConv2D",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    "TensorOperation",
    "UpSampling1D",
    "UpSampling2D",
    "UpSampling3D",
    "ZeroPadding1D",
    "ZeroPadding2D",
    "ZeroPadding3D",
]
