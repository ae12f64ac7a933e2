#!/bin/sh
# Container entrypoint: run the given command (dask scheduler, dask cuda worker, distprove ...);
# arguments that start with "-" are options for the default `dask cuda worker`, which joins
# $DASK_SCHEDULER_ADDRESS (the dask-kubernetes operator sets it).
# Compiled GPU kernels are cached in $DISTPROVE_CACHE_DIR (default ~/.cache/distprove): mount a
# volume there to skip NVRTC compiles when pods restart.
set -e
case "${1:-}" in
    -*) set -- dask cuda worker "$@" ;;
esac
exec "$@"
