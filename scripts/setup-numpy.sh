#!/usr/bin/env bash
# Installs NumPy into .tools/python for the Python example
# (examples/python/copy_batch.py), which `npm test` runs; nothing else needs
# it. Run it with PYTHONPATH=.tools/python. MTC_SETUP_NUMPY=0 skips the
# install (then that example needs a NumPy of python3's own).
# Quick when it is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

NUMPY_VERSION=2.2.6
# The installs go into .tools/, not the system: pip's warning about running
# as root (as CI does) does not apply.
export PIP_ROOT_USER_ACTION=ignore

[ "${MTC_SETUP_NUMPY:-1}" != "0" ] || exit 0
if [ ! -d ".tools/numpy-$NUMPY_VERSION/numpy" ]; then
  echo "setup: installing NumPy $NUMPY_VERSION from PyPI (for examples/python)" >&2
  rm -rf ".tools/numpy-$NUMPY_VERSION"
  mkdir -p .tools
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target ".tools/numpy-$NUMPY_VERSION" "numpy==$NUMPY_VERSION"
fi
ln -sfn "numpy-$NUMPY_VERSION" .tools/python
