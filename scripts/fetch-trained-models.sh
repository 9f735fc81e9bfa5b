#!/bin/sh
# Fetch trained ONNX models for the evaluation grid (configs/paper.json) into models/
# (git-ignored). anpred never downloads anything at run time: a model file is the user's
# file, and this script is how a user gets these ones, on request.
#
#   scripts/fetch-trained-models.sh [DEST]     (default DEST: models)
#
# models/common_det.onnx: ddddocr 1.6.1's text-box detector (a YOLOX-style network
# exported by torch 1.9, opset 11, 416x416 input, trained weights; MIT licence), taken
# from the ddddocr wheel on the Python package index and checked against its SHA-256.
set -eu
dest=${1:-models}
python=${PYTHON:-python3}
sha=6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6
target="$dest/common_det.onnx"
mkdir -p "$dest"
if [ -f "$target" ] && echo "$sha  $target" | sha256sum -c --status; then
    echo "$target: already here"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download --quiet --no-deps ddddocr==1.6.1 -d "$tmp"
"$python" - "$tmp"/ddddocr-1.6.1-*.whl "$target" <<'PY'
import shutil
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("ddddocr/common_det.onnx") as src:
    with open(sys.argv[2], "wb") as out:
        shutil.copyfileobj(src, out)
PY
echo "$sha  $target" | sha256sum -c --quiet
echo "$target: fetched from ddddocr 1.6.1 (sha256 $sha)"
