"""Two logical CPUs and one MirroredStrategy over them, made once per process.

For the scripts that compare training under the strategy with one device (run in a fresh
process: logical devices must be set before TensorFlow initializes its devices). Several such
scripts may run in one process (`tests/framework/training/script_results.py`): they import
this module by the same name, so the devices are set once and they share the strategy (two
MirroredStrategy objects in one process would reuse each other's collective keys).
"""

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

STRATEGY = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
