#!/usr/bin/env bash
# The README's test command, and what CI runs (.ci/run): on a fresh Debian machine (as
# root, or with sudo) it sets up what the tests need, then builds and runs them all.
# `npm test` alone does the second half, where the set-up is done.
set -euo pipefail
cd "$(dirname "$0")/.."
# Sourced, so that the Go toolchain it puts on PATH is the tests' go too.
. scripts/setup-tests.sh
npm test
