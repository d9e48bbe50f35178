"""``python -m kernelwright`` = the ``kernelwright`` command."""

from kernelwright.cli.app import main

main()
