#!/usr/bin/env bash
# podman with the options this project's containers need, in one place: the build, the tests and
# the docs run containers through this script.
#
# CONTAINER_RUNTIME (default runc) and CONTAINER_CGROUP_MANAGER (default cgroupfs): crun fails on
# hosts with hybrid cgroups ("cgroups in hybrid mode not supported"). For `run` and `create`,
# CONTAINER_RUN_FLAGS (default: host network and rlimits no higher than an unprivileged host
# grants; podman's defaults need CAP_SYS_RESOURCE) come before the caller's own flags.
set -euo pipefail
runtime_flags=(--runtime "${CONTAINER_RUNTIME:-runc}" --cgroup-manager "${CONTAINER_CGROUP_MANAGER:-cgroupfs}")
read -r -a run_flags <<<"${CONTAINER_RUN_FLAGS:---network=host --ulimit nofile=20000:20000 --ulimit nproc=1024:1024}"
case "${1:-}" in
  run | create)
    command=$1
    shift
    exec podman "${runtime_flags[@]}" "$command" "${run_flags[@]}" "$@"
    ;;
  *) exec podman "${runtime_flags[@]}" "$@" ;;
esac
