#!/usr/bin/env bash
# Installs Nsight Systems 2024.2.3 (Debian's non-free build) into PREFIX for gprof-orch's CI and
# developers, without installing or changing any system package: the .deb files are unpacked,
# never installed, and apt runs on private lists and caches.
#
#   Usage: scripts/install-nsys.sh [PREFIX]          (default: <repo>/.tools/nsys)
#
# PREFIX/target-linux-x64/nsys is then a working nsys (profile, export, stats) on a machine with
# or without a GPU. The last line on stdout is that path; progress goes to stderr.
#
# - Idempotent: nothing is done when PREFIX/target-linux-x64/nsys already runs (GPROF_NSYS_FORCE=1
#   reinstalls).
# - The .deb files are kept in ${XDG_CACHE_HOME:-~/.cache}/gprof-orch/nsys-debs (GPROF_NSYS_CACHE
#   overrides), so a second install needs no network and takes seconds.
# - The mirror is the one this machine's apt already uses, read from its sources at run time
#   (GPROF_DEBIAN_MIRROR overrides); no mirror is named in the repository.
# - Needs: Debian or a derivative on amd64 with apt-get, dpkg-deb and debian-archive-keyring.
set -euo pipefail

# 2024.2.3 is in Debian's experimental non-free section, with the Arrow and Parquet libraries its
# importer links. It knows the CUDA runtime calls of CUDA 12.8 and 13 programs that 2023.4.4 (trixie's
# non-free, GPROF_NSYS_DEB_VERSION=2023.4.4.54~12.4.1-2 GPROF_NSYS_SUITE=trixie) loses a thread's
# events on (docs/nsight-facts.md).
readonly DEB_VERSION=${GPROF_NSYS_DEB_VERSION:-2024.2.3.38~12.5.0-2+b1}
readonly SUITE=${GPROF_NSYS_SUITE:-experimental}
readonly PACKAGES=(nsight-systems-target nsight-systems)
# name -> version of the libraries the importer links that no Debian release ships (empty: none)
if [[ $DEB_VERSION == 2024.2.3.* ]]; then
  readonly IMPORTER_LIBS=(libarrow500=0~~12.5.0-2+b1 libparquet500=0~~12.5.0-2+b1)
else
  readonly IMPORTER_LIBS=()
fi
readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { printf 'install-nsys: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${1:-$root/.tools/nsys}
[[ $prefix == /* ]] || prefix=$PWD/$prefix
prefix=${prefix%/}
nsys=$prefix/target-linux-x64/nsys
cache=${GPROF_NSYS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gprof-orch/nsys-debs}
debdir=$cache/${DEB_VERSION//[~:]/_}

nsys_works() {
  # The importer must sit beside target-linux-x64 too, or `nsys profile` yields no .nsys-rep.
  [[ -x $nsys && -x $prefix/host-linux-x64/QdstrmImporter ]] && "$nsys" --version >/dev/null 2>&1
}

# an earlier install of another version (its marker names the .deb version) is replaced
if [[ ${GPROF_NSYS_FORCE:-0} != 1 ]] && nsys_works && grep -qF " $DEB_VERSION " "$prefix/.gprof-orch-nsys" 2>/dev/null; then
  log "already installed: $("$nsys" --version 2>&1 | tail -n1)"
  echo "$nsys"
  exit 0
fi

[[ $(dpkg --print-architecture 2>/dev/null) == amd64 ]] || die "only amd64 Debian/Ubuntu is supported"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "apt-get and dpkg-deb are needed"

# Refuse to replace a folder that is not an earlier nsys install: PREFIX gets rm -rf'ed below.
if [[ -e $prefix ]]; then
  [[ -d $prefix ]] || die "$prefix exists and is not a folder"
  for entry in "$prefix"/* "$prefix"/.[!.]*; do
    [[ -e $entry ]] || continue
    case ${entry##*/} in
      target-linux-x64 | host-linux-x64 | .gprof-orch-nsys) ;;
      *) die "$prefix holds other things than an nsys install (${entry##*/}); pick an empty PREFIX" ;;
    esac
  done
fi

os_codename() { sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"' | head -n1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Prints the first non-security Debian archive URI of this machine's apt sources (deb822 files
# first, as Debian 12 images use them, then one-line sources.list files).
find_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    # deb822: stanzas are separated by blank lines; keep a stanza that serves .debs and no
    # *-security suite (the security archive has no non-free nsight-systems).
    awk 'function flush() { if (uri != "" && types ~ /(^| )deb( |$)/ && suites !~ /security/) { print uri; found = 1; exit } uri = types = suites = "" }
         /^[[:space:]]*$/ { flush(); next }
         tolower($1) == "types:" { types = $0 }
         tolower($1) == "uris:" { uri = $2 }
         tolower($1) == "suites:" { suites = $0 }
         END { if (!found) flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    # "deb [options] URI suite components": skip the options and security suites
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                       if ($(i + 1) !~ /security/) print $i }' "$f"
  done
}

# Runs apt-get on private lists and caches, so the system's apt state is neither read for
# packages nor written.
private_apt() {
  apt-get -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root "$@"
}

apt_ready=0
prepare_apt() {
  ((apt_ready)) && return
  local mirror=${GPROF_DEBIAN_MIRROR:-$(find_mirror | head -n1)}
  [[ -n $mirror ]] || die "no Debian mirror in /etc/apt/sources*; set GPROF_DEBIAN_MIRROR"
  [[ -f $KEYRING ]] || die "$KEYRING is missing (package debian-archive-keyring)"
  local codename
  codename=$(os_codename)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  {
    echo "deb [signed-by=$KEYRING] $mirror $SUITE non-free"
    # the machine's own release, for libssh-4 when the system lacks it
    if [[ -n $codename && $codename != "$SUITE" ]]; then
      echo "deb [signed-by=$KEYRING] $mirror $codename main"
    fi
  } > "$work/sources.list"
  log "reading the package lists of $SUITE non-free"
  private_apt update -qq >&2 || die "apt-get update on the private lists failed"
  apt_ready=1
}

# Puts PKG (an apt spec: name=version or name/suite) into DEST, verified by apt against the
# signed Release file, and records its sha256 so a cached copy can be checked later.
fetch_deb() {
  local spec=$1 dest=$2
  if [[ -f $dest && -f $dest.sha256 ]] && (cd "${dest%/*}" && sha256sum --quiet -c "${dest##*/}.sha256" 2>/dev/null); then
    log "cached: ${dest##*/}"
    return
  fi
  prepare_apt
  log "downloading $spec"
  rm -rf "$work/dl" && mkdir -p "$work/dl"
  (cd "$work/dl" && private_apt download -qq "$spec" >&2) || die "apt-get download $spec failed"
  local got=("$work"/dl/*.deb)
  [[ ${#got[@]} == 1 && -f ${got[0]} ]] || die "apt-get download $spec gave ${#got[@]} files"
  mkdir -p "${dest%/*}"
  mv "${got[0]}" "$dest.part"
  mv "$dest.part" "$dest"
  (cd "${dest%/*}" && sha256sum "${dest##*/}" > "${dest##*/}.sha256")
}

for pkg in "${PACKAGES[@]}"; do
  fetch_deb "$pkg=$DEB_VERSION" "$debdir/$pkg.deb"
done
for spec in "${IMPORTER_LIBS[@]}"; do
  fetch_deb "$spec" "$debdir/${spec%%=*}.deb"
done

log "unpacking"
mkdir -p "$work/x"
for pkg in "${PACKAGES[@]}"; do
  dpkg-deb -x "$debdir/$pkg.deb" "$work/x"
done
stage=$work/stage
mkdir -p "$stage"
# NVIDIA's layout: nsys finds its importer at ../host-linux-x64 beside target-linux-x64; Debian
# puts the two folders apart.
mv "$work/x/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64" "$stage/"
mv "$work/x/usr/lib/nsight-systems/host-linux-x64" "$stage/"

# Debian links libssh.so to the system's libssh.so.4; the importer needs the real library.
rm -f "$stage"/host-linux-x64/libssh.so*
syslibssh=/usr/lib/x86_64-linux-gnu/libssh.so.4
if [[ -e $syslibssh ]]; then
  cp -L "$syslibssh" "$stage/host-linux-x64/libssh.so"
else
  codename=$(os_codename)
  [[ -n $codename ]] || die "$syslibssh is missing and /etc/os-release names no release"
  fetch_deb "libssh-4/$codename" "$cache/libssh-4_$codename.deb"
  dpkg-deb -x "$cache/libssh-4_$codename.deb" "$work/libssh"
  cp -L "$work/libssh/usr/lib/x86_64-linux-gnu/libssh.so.4" "$stage/host-linux-x64/libssh.so"
fi
# The importer links Debian's own Arrow and Parquet (IMPORTER_LIBS): keep them beside it.
for spec in "${IMPORTER_LIBS[@]}"; do
  dpkg-deb -x "$debdir/${spec%%=*}.deb" "$work/libs"
  cp -L "$work"/libs/usr/lib/x86_64-linux-gnu/lib*.so.* "$stage/host-linux-x64/"
done
# `nsys stats` runs its report scripts from host-linux-x64/python/lib, where Debian ships none.
mkdir -p "$stage/host-linux-x64/python/lib"
cp "$stage"/target-linux-x64/python/lib/*.py "$stage/host-linux-x64/python/lib/"
printf 'nsight-systems %s from Debian %s non-free, unpacked by scripts/install-nsys.sh\n' \
  "$DEB_VERSION" "$SUITE" > "$stage/.gprof-orch-nsys"

"$stage/target-linux-x64/nsys" --version >/dev/null 2>&1 || die "the unpacked nsys does not run"
# The importer (.qdstrm -> .nsys-rep) runs only at the end of `nsys profile`: check its libraries
# now rather than let the first profile end with "No reports were generated".
missing=$(ldd "$stage/host-linux-x64/QdstrmImporter" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
[[ -z $missing ]] || die "QdstrmImporter lacks system libraries: $missing(install them with apt)"

rm -rf "$prefix"
mkdir -p "$(dirname "$prefix")"
mv "$stage" "$prefix"
nsys_works || die "$nsys does not run after the install"
log "installed: $("$nsys" --version 2>&1 | tail -n1)"
echo "$nsys"
