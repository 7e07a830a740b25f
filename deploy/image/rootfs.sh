# The Debian root filesystems of the images (sourced by build.sh): made by mmdebstrap from the
# packages of packages/<name>.list, cached in $cache/rootfs under a key of this file, the lists
# and the customize hooks.
# shellcheck shell=bash

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
# The service's user: no login, no home; DATA_DIR belongs to it.
app_uid=10001

packages_of() { grep -v '^[[:space:]]*\(#\|$\)' "$here/packages/$1.list" | paste -sd, -; }

# Documentation, manual pages and translations stay out of every image (Debian's copyright files stay).
dpkg_excludes=(
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
)

# The key of a root filesystem: what goes into it. $@: the targets whose package lists (and
# customize hooks) it installs.
rootfs_key() {
  {
    printf '%s %s %s\n' "$suite" "$mirror" "$app_uid"
    for list in "$@"; do cat "$here/packages/$list".*; done
    cat "$here/rootfs.sh"
  } | sha256sum | cut -c1-16
}

# A root filesystem directory with the base packages plus those of $1 (none for the base itself),
# made once per key. Prints its path.
rootfs() {
  local target=$1 lists=(base) include
  [ "$target" = base ] || lists+=("$target")
  local dir lock
  dir="$cache/rootfs/$target-$(rootfs_key "${lists[@]}")"
  mkdir -p "$cache/rootfs"
  # One build per key at a time (two builds of one tree, or of two trees, share the cache); it is
  # made aside and renamed into place, so a build that dies leaves no half root filesystem behind.
  exec {lock}>"$dir.lock"
  flock "$lock"
  if [ ! -d "$dir" ]; then
    include=$(for list in "${lists[@]}"; do packages_of "$list"; done | paste -sd, -)
    local hooks=()
    # What a target changes after its packages are in: packages/<target>.customize, run by
    # mmdebstrap with the root filesystem's path.
    [ ! -x "$here/packages/$target.customize" ] || hooks=(--customize-hook="$here/packages/$target.customize")
    log "mmdebstrap $suite ($target: $include) from $mirror"
    rm -rf "$dir.partial"
    # The customize hooks: the service's user, and nothing of the build's caches or logs.
    # merged-usr: /bin, /lib and /sbin as links into /usr by mmdebstrap itself, not by the usrmerge
    # package (which would pull full Perl into every image).
    mmdebstrap --quiet --variant=essential --include="$include" "${dpkg_excludes[@]}" \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --customize-hook="echo 'app:x:$app_uid:$app_uid:auth service:/nonexistent:/usr/sbin/nologin' >>\"\$1/etc/passwd\"" \
      --customize-hook="echo 'app:x:$app_uid:' >>\"\$1/etc/group\"" \
      --customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/* "$1"/var/lib/apt/lists' "${hooks[@]}" \
      "$suite" "$dir.partial" "$mirror" >&2
    mv "$dir.partial" "$dir"
  else
    log "root filesystem $target: cached ($dir)"
  fi
  exec {lock}>&-
  printf '%s\n' "$dir"
}
