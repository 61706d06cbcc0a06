#!/bin/sh
# Container images without a registry: scripts/build-image.sh [VERSION]
#
# Builds two images with podman (buildah underneath) from binaries built
# on this machine, so nothing is pulled:
#
#   ghcr.io/pp-offline/pp-offline:VERSION       FROM scratch: the static
#       binary (CGO_ENABLED=0 -tags nocuda), CA certificates (the host's
#       bundle, when it has one), /tmp; CPU only. Same content as
#       Dockerfile's final stage.
#   ghcr.io/pp-offline/pp-offline:VERSION-cuda  FROM scratch: the binary
#       with the CUDA binding, the host's glibc (the dynamic loader, libc
#       and the libraries libcuda.so.1 links), CA certificates, /tmp; the
#       NVIDIA container toolkit mounts libcuda at run time. The
#       counterpart of Dockerfile.cuda (which uses a distroless glibc base).
#
# Both run as user 65532 with ENTRYPOINT pp-offline. Then each image runs
# the tiny job (testdata/tiny mounted read-only at /data, an output folder
# at /out), and the transcript must equal
# testdata/tiny/expected/run_pt/output.json byte for byte and the WAV the
# host build's; the CUDA image must also report a missing driver in one
# line, and load the host's libcuda.so.1 when it is bind-mounted in as the
# toolkit would (where the host has one).
#
# The jobs run with `podman run --network none`. Where the OCI runtime
# cannot start a container (crun refuses a hybrid cgroup v1/v2 host, or
# rlimits cannot be set without CAP_SYS_RESOURCE, as inside some CI
# containers), the image's file system is mounted (buildah mount) and its
# entrypoint is run in a chroot with the image's user and environment, in
# new mount and network namespaces: the same files, no network; the log
# says which way each job ran.
#
# VERSION defaults to `git describe --tags --always`. PP_IMAGE_SAVE=1 also
# writes the images to dist/ as OCI archives (podman load -i).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)

for tool in podman buildah go cmp; do
	command -v "$tool" >/dev/null 2>&1 || { echo "build-image.sh: $tool is not installed" >&2; exit 2; }
done
commit=$(git rev-parse --short=12 HEAD)
version=${1:-$(git describe --tags --always 2>/dev/null || echo "$commit")}
case $version in
*[!A-Za-z0-9._-]*|'') echo "build-image.sh: version '$version' is not a valid image tag" >&2; exit 2 ;;
esac
image=ghcr.io/pp-offline/pp-offline
ldflags="-s -w -X main.version=$version -X main.commit=$commit"
# Storage and runtime settings that work as root in a container too.
pm="podman --events-backend file --cgroup-manager cgroupfs"

tmp=$(mktemp -d /tmp/pp-image.XXXXXX)
ctrs=
cleanup() {
	for c in $ctrs; do buildah rm "$c" >/dev/null 2>&1 || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
start=$(date +%s)

# rootfs DIR: the files both images share.
rootfs() {
	mkdir -p "$1/usr/local/bin" "$1/tmp" "$1/etc/ssl/certs"
	chmod 1777 "$1/tmp"
	if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
		cp -L /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
	else
		echo "note: no /etc/ssl/certs/ca-certificates.crt here: the image has no CA certificates (downloads from the hub will fail; use a cache)" >&2
	fi
}

echo "== binaries ($version, commit $commit)"
rootfs "$tmp/cpu/rootfs"
CGO_ENABLED=0 go build -trimpath -tags nocuda -ldflags "$ldflags" -o "$tmp/cpu/rootfs/usr/local/bin/pp-offline" .
rootfs "$tmp/cuda/rootfs"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/cuda/rootfs/usr/local/bin/pp-offline" .
# glibc for the CUDA image: the loader the binary names, libc, and what
# libcuda.so.1 links (libm, libdl, libpthread, librt).
interp=$(file -b "$tmp/cuda/rootfs/usr/local/bin/pp-offline" | sed -n 's/.*interpreter \([^,]*\),.*/\1/p')
[ -n "$interp" ] || { echo "build-image.sh: the CUDA build names no dynamic loader" >&2; exit 1; }
mkdir -p "$tmp/cuda/rootfs$(dirname "$interp")"
cp -L "$interp" "$tmp/cuda/rootfs$interp"
libdir=$(dirname "$(ldconfig -p | sed -n 's/.*libc\.so\.6 (libc6,x86-64) => //p' | head -1)")
[ -d "$libdir" ] || { echo "build-image.sh: cannot find the host's libc.so.6" >&2; exit 1; }
mkdir -p "$tmp/cuda/rootfs$libdir" "$tmp/cuda/rootfs/usr/lib/x86_64-linux-gnu"
for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
	cp -L "$libdir/$l" "$tmp/cuda/rootfs$libdir/"
done

cat >"$tmp/cpu/Containerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin HOME=/tmp
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pp-offline"]
EOF
cat >"$tmp/cuda/Containerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin HOME=/tmp \
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/local/nvidia/lib64
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pp-offline"]
EOF

echo "== images"
for v in cpu cuda; do
	tag=$image:$version
	[ $v = cuda ] && tag=$tag-cuda
	$pm build -q --network none --pull=never --label "org.opencontainers.image.version=$version" \
		--label "org.opencontainers.image.revision=$commit" -t "$tag" "$tmp/$v" >/dev/null
	echo "$tag: $($pm image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1/1e6}')"
done

# run TAG MOUNTS ARGS...: run the image's entrypoint with ARGS; MOUNTS is
# "host:container[:ro] ..." (spaces separate). Output in $tmp/run.log.
run() {
	tag=$1 mounts=$2
	shift 2
	vs=
	for m in $mounts; do vs="$vs -v $m"; done
	# shellcheck disable=SC2086
	if $pm run --rm --network none --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 $vs "$tag" "$@" >"$tmp/run.log" 2>&1; then
		how="podman run"
		return 0
	fi
	rc=$?
	if ! grep -q "OCI runtime error\|OCI permission denied" "$tmp/run.log"; then
		how="podman run"
		return $rc
	fi
	cp "$tmp/run.log" "$tmp/podman.log"
	how="chroot (podman run: $(grep -o 'crun: .*' "$tmp/podman.log" | head -1))"
	c=$(buildah from -q --pull-never "$tag")
	ctrs="$ctrs $c"
	mnt=$(buildah mount "$c")
	user=$($pm image inspect --format '{{.Config.User}}' "$tag")
	entry=$($pm image inspect --format '{{range .Config.Entrypoint}}{{.}} {{end}}' "$tag")
	envs=$($pm image inspect --format '{{range .Config.Env}}{{.}} {{end}}' "$tag")
	binds=
	for m in $mounts; do
		src=${m%%:*} rest=${m#*:} dst=${rest%%:*}
		if [ -d "$src" ]; then mkdir -p "$mnt$dst"; else mkdir -p "$(dirname "$mnt$dst")" && : >"$mnt$dst"; fi
		binds="$binds mount --bind '$src' '$mnt$dst';"
		case $rest in *:ro) binds="$binds mount -o remount,bind,ro '$mnt$dst';" ;; esac
	done
	args=
	for a in "$@"; do args="$args '$a'"; done
	# shellcheck disable=SC2086
	unshare --mount --net sh -c "$binds exec env -i $envs $(command -v chroot) --userspec=$user '$mnt' $entry $args" >"$tmp/run.log" 2>&1
}

want=testdata/tiny/expected/run_pt/output.json
job="--input-wav /data/input.wav --voice-prompt TINYF0.pt --voice-prompt-dir /data/voices --config /data/config.json --moshi-weight /data/model.safetensors --mimi-weight /data/mimi.safetensors --tokenizer /data/tokenizer.model --greedy --output-wav /out/out.wav --output-text /out/out.json"
"$tmp/cpu/rootfs/usr/local/bin/pp-offline" --input-wav testdata/tiny/input.wav --voice-prompt TINYF0.pt --voice-prompt-dir testdata/tiny/voices \
	--config testdata/tiny/config.json --moshi-weight testdata/tiny/model.safetensors --mimi-weight testdata/tiny/mimi.safetensors \
	--tokenizer testdata/tiny/tokenizer.model --greedy --device cpu --output-wav "$tmp/host.wav" --output-text "$tmp/host.json" 2>"$tmp/host.log"

fail=0
mkdir -p "$tmp/out"
chmod 0777 "$tmp/out" # the images run as user 65532
echo "== runs"
for v in cpu cuda; do
	tag=$image:$version
	[ $v = cuda ] && tag=$tag-cuda
	rm -f "$tmp/out/"*
	# shellcheck disable=SC2086
	if run "$tag" "$root/testdata/tiny:/data:ro $tmp/out:/out" $job --device cpu &&
		cmp -s "$tmp/out/out.json" "$want" && cmp -s "$tmp/out/out.wav" "$tmp/host.wav"; then
		echo "ok   $tag: the tiny job ($how): transcript = $want, WAV = the host build's"
	else
		echo "FAIL $tag: the tiny job ($how)"; tail -5 "$tmp/run.log"; fail=1
	fi
	if run "$tag" "" --version && grep -q "$version (commit $commit" "$tmp/run.log"; then
		echo "ok   $tag: --version: $(cat "$tmp/run.log")"
	else
		echo "FAIL $tag: --version: $(cat "$tmp/run.log")"; fail=1
	fi
done

tag=$image:$version-cuda
rm -f "$tmp/out/"*
# shellcheck disable=SC2086
if run "$tag" "$root/testdata/tiny:/data:ro $tmp/out:/out" $job --device cuda; then
	echo "FAIL $tag: --device cuda without a driver ran ($how)"; fail=1
elif [ "$(wc -l <"$tmp/run.log")" -eq 1 ] && grep -q "libcuda.so.1" "$tmp/run.log" && ! ls "$tmp/out/"* >/dev/null 2>&1; then
	echo "ok   $tag: --device cuda without the driver ($how): $(cut -c1-150 "$tmp/run.log")"
else
	echo "FAIL $tag: --device cuda without the driver ($how):"; cat "$tmp/run.log"; fail=1
fi
libcuda=$(ldconfig -p | sed -n 's/.*libcuda\.so\.1 (libc6,x86-64) => //p' | head -1)
if [ -n "$libcuda" ]; then
	# As the toolkit does: the host's driver library mounted into the image.
	# shellcheck disable=SC2086
	if run "$tag" "$root/testdata/tiny:/data:ro $tmp/out:/out $(readlink -f "$libcuda"):/usr/lib/x86_64-linux-gnu/libcuda.so.1:ro" $job --device cuda; then
		echo "ok   $tag: --device cuda with the host's libcuda.so.1 mounted ($how): ran on the GPU"
	elif grep -q "cuInit\|no usable GPU\|CUDA_ERROR" "$tmp/run.log" && ! grep -q "libcuda.so.1" "$tmp/run.log"; then
		echo "ok   $tag: --device cuda with the host's libcuda.so.1 mounted ($how): the driver loads; $(cut -c1-150 "$tmp/run.log")"
	else
		echo "FAIL $tag: --device cuda with the host's libcuda.so.1 mounted ($how):"; cat "$tmp/run.log"; fail=1
	fi
else
	echo "note: no libcuda.so.1 on this host: the driver library was not mounted into the CUDA image"
fi

if [ "${PP_IMAGE_SAVE:-}" = 1 ]; then
	mkdir -p dist
	for s in "" -cuda; do
		$pm save -q --format oci-archive -o "dist/pp-offline-$version$s.oci.tar" "$image:$version$s"
		echo "wrote dist/pp-offline-$version$s.oci.tar"
	done
fi
echo "== $(($(date +%s) - start)) s"
exit $fail
