"""A user module that ends the program when imported (for imports_sys_exit.yaml)."""
import sys

sys.exit(0)
