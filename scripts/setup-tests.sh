#!/usr/bin/env bash
# What `npm test` needs beyond Node, installed only where it is missing, so that a run
# can be done again and changes nothing the second time: the Debian packages the tests
# drive (as root, or with sudo), the Go toolchain go/go.mod names, the Go module built once,
# geth, and the npm packages. scripts/test.sh (the README's test command, and CI's: .ci/run)
# runs it first; run alone, it sets up for `npm test` and `npx tap`.
#
# Sourced (as scripts/test.sh does), it leaves PATH with that Go first; run alone, it
# prints the PATH to use when the Go that go/go.mod names is not the system's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# System packages, by their Debian names. For test/system/runtimes.test.ts: Chromium (the
# browser host, driven by playwright-core) and wabt (wasm2c, the C host), plus a C
# compiler and make.
packages=()
[ -x /usr/bin/chromium ] || packages+=(chromium)
{ command -v wasm2c >/dev/null && [ -f /usr/share/wabt/wasm2c/wasm-rt-impl.c ]; } || packages+=(wabt)
command -v cc >/dev/null || packages+=(gcc libc6-dev)
command -v make >/dev/null || packages+=(make)
# systemd-analyze, which checks the unit under deploy/ (test/system/deploy.test.ts), and
# systemd itself, PID 1 of the docs test's private machine.
{ command -v systemd-analyze >/dev/null && [ -x /lib/systemd/systemd ]; } || packages+=(systemd)
# nginx and Caddy in front of api-auth (test/http/auth-check.test.ts), openssl for the TLS
# tests' certificates, git for the clean clones of test/system/install.test.ts.
command -v nginx >/dev/null || packages+=(nginx-light)
command -v caddy >/dev/null || packages+=(caddy)
command -v openssl >/dev/null || packages+=(openssl)
command -v git >/dev/null || packages+=(git)
# test/docs/readme.test.ts runs the README's blocks in a private machine (unshare and
# nsenter, from util-linux; ip, from iproute2) and the blocks themselves use curl and jq.
{ command -v unshare >/dev/null && command -v nsenter >/dev/null; } || packages+=(util-linux)
command -v ip >/dev/null || packages+=(iproute2)
command -v curl >/dev/null || packages+=(curl)
command -v jq >/dev/null || packages+=(jq)
# etcd, started on loopback ports by the fleet's tests (test/fleet/fleet.test.ts).
command -v etcd >/dev/null || packages+=(etcd-server)
# promtool, Prometheus's linter, run on /ext/metrics (test/http/metrics-promtool.test.ts).
command -v promtool >/dev/null || packages+=(prometheus)
# Go, for go/ (test/fleet/go.test.ts): any go to start from (Debian's golang-go, 1.19 on Debian 12).
command -v go >/dev/null || packages+=(golang-go)
# What goes into the system (the packages, geth) is installed as root: with sudo when this is not root.
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
if [ "${#packages[@]}" -gt 0 ]; then
  echo "setup: installing ${packages[*]}"
  if [ "${#as_root[@]}" -gt 0 ] && ! command -v sudo >/dev/null; then
    echo "setup: missing ${packages[*]} (Debian packages), and this is not root and has no sudo: run this as root, or install them as root" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "setup: missing ${packages[*]} (Debian's names), and there is no apt-get: install them with this system's package manager" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}"
else
  echo "setup: the system packages are installed"
fi

# The Go that go/go.mod asks for. A go older than 1.21 cannot switch toolchains by itself
# (GOTOOLCHAIN), so it fetches the toolchain from the Go module proxy as the module
# golang.org/toolchain, as a newer go does, and runs it from the module cache (where a
# second run finds it). Then the module's dependencies, so that go/ builds offline from
# the cache (test/fleet/go.test.ts).
go_version=$(sed -n 's/^go //p' go/go.mod)
if [ "$(printf '%s\n' "go$go_version" "$(go env GOVERSION)" | sort -V | head -n 1)" != "go$go_version" ]; then
  toolchain="golang.org/toolchain@v0.0.1-go$go_version.linux-$(go env GOARCH)"
  goroot="$(go env GOMODCACHE)/$toolchain"
  if [ ! -x "$goroot/bin/go" ]; then
    echo "setup: fetching go$go_version (go/go.mod) from the Go module proxy"
    GOFLAGS=-modcacherw go mod download "$toolchain"
    chmod u+x "$goroot"/bin/* "$goroot"/pkg/tool/*/*
  fi
  export PATH="$goroot/bin:$PATH"
  [ "${BASH_SOURCE[0]}" != "$0" ] || echo "setup: for npm test alone, put go$go_version first: export PATH=$goroot/bin:\$PATH"
fi
go version
# The module's dependencies, then the module and its tests compiled and vetted once, as npm
# ci builds the host: test/fleet/go.test.ts then finds them in Go's build cache, rather than
# compiling gRPC, the etcd client and wazero and analysing them for vet within the suite
# (about 85 s of CPU for the compiles from a cold cache, about 12 s for vet; a second run
# finds them cached). The same GOFLAGS as the test's, so that its builds and its vet hit
# that cache; the test still runs `go vet` and `go test` itself.
# staticcheck (the module's pinned tool) is built into the cache here too: about a minute of CPU.
(cd go && go mod download && export GOFLAGS='-mod=readonly -buildvcs=false' && go build ./... && go vet ./... && go test -count=1 -run '^$' ./... >/dev/null \
  && go tool staticcheck -version >/dev/null)

# geth, the Ethereum node test/system/ethereum.test.ts puts behind api-auth beside ganache
# (geth --dev, a chain of its own), at /usr/local/bin/geth: where the test looks for it,
# and on the PATH of the docs test's private machine, whose /usr/local/bin is the host's
# (docs/guides/ethereum.md starts it). Debian has no geth package, so it is built from the
# Go module proxy by the Go above (geth 1.17 needs 1.25 or later): about 5 minutes on 2
# cores from a cold cache, a few seconds from Go's build cache afterwards; nothing when
# that version is installed.
geth_version=1.17.10
if [ "$( (/usr/local/bin/geth version 2>/dev/null || true) | sed -n 's/^Version: //p')" != "$geth_version-stable" ]; then
  echo "setup: building geth $geth_version from the Go module proxy (about 5 minutes on 2 cores)"
  gobin=$(mktemp -d)
  (cd "$gobin" && GOBIN="$gobin" GOFLAGS=-modcacherw go install "github.com/ethereum/go-ethereum/cmd/geth@v$geth_version")
  if [ "${#as_root[@]}" -gt 0 ] && ! command -v sudo >/dev/null; then
    echo "setup: geth $geth_version is built ($gobin/geth), and this is not root and has no sudo: install it as root at /usr/local/bin/geth" >&2
    exit 1
  fi
  "${as_root[@]}" install -m 0755 "$gobin/geth" /usr/local/bin/geth
  rm -rf "$gobin"
fi
/usr/local/bin/geth version | sed -n 's/^Version: /geth /p'

node --version
npm --version
# The npm packages, from the lock file, once: `npm ci` builds as it installs (prepare).
# After a pull that changed package-lock.json, run `npm ci` again.
test -d node_modules || npm ci --no-audit --no-fund
