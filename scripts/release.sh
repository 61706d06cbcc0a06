#!/bin/sh
# Release binaries: scripts/release.sh [VERSION]
#
# Builds pp-offline for linux/amd64, linux/arm64, darwin/arm64,
# darwin/amd64 and windows/amd64 (plus a static linux/amd64 build without
# the CUDA binding, -tags nocuda) into dist/, with CGO_ENABLED=0,
# -trimpath and the version and commit stamped (-X main.version,
# -X main.commit), writes dist/SHA256SUMS, and checks every binary: its
# format and architecture (file), the Go build information
# (go version -m: GOOS, GOARCH, CGO_ENABLED=0, -trimpath, the tags), the
# stamps and, for the one this machine can run, that --version prints the
# version and the commit.
#
# VERSION defaults to `git describe --tags --always` (the commit when
# there is no tag). dist/ is git-ignored and emptied of earlier
# pp-offline-* binaries first.
set -eu
cd "$(dirname "$0")/.."

commit=$(git rev-parse --short=12 HEAD)
version=${1:-$(git describe --tags --always 2>/dev/null || echo "$commit")}
case $version in
*[!A-Za-z0-9._+-]*|'') echo "release.sh: version '$version' has characters other than letters, digits and . _ + -" >&2; exit 2 ;;
esac
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "release.sh: note: the working tree has uncommitted changes: the binaries are built from it, not from $commit alone" >&2
fi

mkdir -p dist
rm -f dist/pp-offline-* dist/SHA256SUMS
ldflags="-s -w -X main.version=$version -X main.commit=$commit"

# target: GOOS GOARCH build-tags name-suffix (- for none)
targets="linux amd64 - -,linux arm64 - -,darwin arm64 - -,darwin amd64 - -,windows amd64 - .exe,linux amd64 nocuda -nocuda"

fail=0
IFS=,
for t in $targets; do
	IFS=' '
	set -- $t
	goos=$1 goarch=$2 tags=$3 suffix=$4
	[ "$tags" = - ] && tags=
	[ "$suffix" = - ] && suffix=
	ext=
	case $suffix in .exe) ext=.exe suffix= ;; esac
	out=dist/pp-offline-$version-$goos-$goarch$suffix$ext
	echo "build $out"
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out" .

	# The Go build information must name the target (with -trimpath Go
	# leaves -ldflags out of it: the stamps are looked for in the binary).
	info=$(go version -m "$out")
	for want in "GOOS=$goos" "GOARCH=$goarch" "CGO_ENABLED=0" "-trimpath=true"; do
		case $info in
		*"$want"*) ;;
		*) echo "release.sh: $out: go version -m does not show $want" >&2; fail=1 ;;
		esac
	done
	for want in "$version" "$commit"; do
		grep -aqF "$want" "$out" || { echo "release.sh: $out: the stamp $want is not in the binary" >&2; fail=1; }
	done
	if [ -n "$tags" ]; then
		case $info in *"-tags=$tags"*) ;; *) echo "release.sh: $out: go version -m does not show -tags=$tags" >&2; fail=1 ;; esac
	fi

	# The file format must be the target's.
	f=$(file -b "$out")
	case $goos/$goarch in
	linux/amd64) want="ELF 64-bit LSB*x86-64" ;;
	linux/arm64) want="ELF 64-bit LSB*ARM aarch64" ;;
	darwin/amd64) want="Mach-O 64-bit*x86_64" ;;
	darwin/arm64) want="Mach-O 64-bit*arm64" ;;
	windows/amd64) want="PE32+ executable*x86-64" ;;
	esac
	case $f in
	*$want*) ;;
	*) echo "release.sh: $out: file says '$f', want '$want'" >&2; fail=1 ;;
	esac
	if [ "$tags" = nocuda ]; then
		case $f in *"statically linked"*) ;; *) echo "release.sh: $out: not statically linked: $f" >&2; fail=1 ;; esac
	fi
	echo "  $f"

	# Run what this machine can run: --version names the version and commit.
	if [ "$goos" = "$(go env GOHOSTOS)" ] && [ "$goarch" = "$(go env GOHOSTARCH)" ]; then
		v=$("$out" --version)
		echo "  $v"
		case $v in
		*"$version (commit $commit"*) ;;
		*) echo "release.sh: $out --version: '$v', want version $version and commit $commit" >&2; fail=1 ;;
		esac
	fi
	IFS=,
done
IFS=' '

(cd dist && sha256sum pp-offline-"$version"-* >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
echo "dist/SHA256SUMS:"
cat dist/SHA256SUMS
if [ $fail -ne 0 ]; then
	echo "release.sh: some checks failed (above)" >&2
	exit 1
fi
