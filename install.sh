#!/bin/sh
# Install supervisor from a release archive, checked against its SHA256SUMS.
#
#   curl -fsSL https://raw.githubusercontent.com/seed-86a41135/supervisor/main/install.sh | sh
#   sh install.sh [--version X.Y.Z] [--dir DIR] [--base-url URL]
#
# --version  the release (default: the newest)
# --dir      where the binary goes (default: ~/.local/bin)
# --base-url where the release's archives and SHA256SUMS are (default:
#            GitHub's download URL of that release; a mirror or a local
#            directory served over HTTP works too)
#
# Nothing is installed unless the archive's SHA-256 is the one SHA256SUMS
# names for it. Needs curl or wget, tar, and sha256sum or shasum.
set -eu

repo=seed-86a41135/supervisor
version="${SUPERVISOR_VERSION:-}"
dir="${HOME}/.local/bin"
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version=${2:?--version needs a value}; shift 2 ;;
    --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
    --base-url) base=${2:?--base-url needs a URL}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see install.sh --help)" >&2; exit 2 ;;
  esac
done

fail() { echo "install.sh: $*" >&2; exit 1; }

if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL --retry 2 -o "$2" "$1"; }
  final_url() { curl -fsSLI -o /dev/null -w '%{url_effective}' "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q -O "$2" "$1"; }
  final_url() { wget -q --max-redirect=5 -S --spider "$1" 2>&1 | sed -n 's/^ *Location: *//p' | tail -1; }
else
  fail "neither curl nor wget is installed: install one and rerun"
fi
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  fail "neither sha256sum nor shasum is installed: cannot check the download"
fi

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) fail "no release for $(uname -s): download the Windows zip from https://github.com/$repo/releases" ;;
esac
case "$(uname -m)" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) fail "no release for the $(uname -m) processor (there are amd64 and arm64)" ;;
esac

if [ -z "$version" ]; then
  [ -z "$base" ] || fail "--base-url needs --version (a mirror has no 'newest')"
  tag=$(final_url "https://github.com/$repo/releases/latest") || fail "cannot reach GitHub to find the newest release; pass --version"
  version=${tag##*/}
fi
version=${version#v}
case "$version" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) fail "version \"$version\" is not X.Y.Z" ;;
esac
[ -n "$base" ] || base="https://github.com/$repo/releases/download/v$version"

name="supervisor_${version}_${os}_${arch}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fetch "$base/SHA256SUMS" "$tmp/SHA256SUMS" || fail "cannot download $base/SHA256SUMS"
fetch "$base/$name.tar.gz" "$tmp/$name.tar.gz" || fail "cannot download $base/$name.tar.gz"
want=$(awk -v f="$name.tar.gz" '$2 == f || $2 == "*" f { print $1 }' "$tmp/SHA256SUMS")
[ -n "$want" ] || fail "SHA256SUMS of $version names no $name.tar.gz"
got=$(sha256 "$tmp/$name.tar.gz")
[ "$got" = "$want" ] || fail "checksum mismatch for $name.tar.gz: got $got, SHA256SUMS says $want; nothing was installed"
tar -xzf "$tmp/$name.tar.gz" -C "$tmp" || fail "cannot unpack $name.tar.gz"
[ -f "$tmp/$name/supervisor" ] || fail "$name.tar.gz holds no $name/supervisor"
mkdir -p "$dir" || fail "cannot create $dir"
# A temp file and a rename: a host starting a server meanwhile runs the old
# binary or the new one, never a half-written file.
cp "$tmp/$name/supervisor" "$dir/.supervisor.new" && chmod 755 "$dir/.supervisor.new" &&
  mv -f "$dir/.supervisor.new" "$dir/supervisor" || fail "cannot write $dir/supervisor"
# The lean run entry, beside supervisor (archives of Linux and macOS
# since it exists).
if [ -f "$tmp/$name/supervisor-run" ]; then
  cp "$tmp/$name/supervisor-run" "$dir/.supervisor-run.new" && chmod 755 "$dir/.supervisor-run.new" &&
    mv -f "$dir/.supervisor-run.new" "$dir/supervisor-run" || fail "cannot write $dir/supervisor-run"
fi
echo "installed $("$dir/supervisor" version) at $dir/supervisor"
case ":$PATH:" in
  *":$dir:"*) ;;
  *) echo "note: $dir is not on PATH: add it, or run $dir/supervisor" ;;
esac
echo "next: $dir/supervisor install --dry-run claude-code   (see what it would change)"
