#!/usr/bin/env bash
# Builds the bundled plugins (plugins/<name>/handler/main.go) into OUT, one
# folder each, as the core finds them beside carapace (cmd/wiring:
# bin/plugins/<name>, or Contents/Resources/plugins/<name> in Carapace.app):
#
#   OUT/<name>/handler        the handler, built here
#   OUT/<name>/manifest.json  copied from plugins/<name>/
#   OUT/<name>/skills/        copied from plugins/<name>/
#
# and prints the handlers' pins on stdout, the one line that make links into
# carapace: name=sha256[,name=sha256...]. Everything else goes to stderr.
#
#   scripts/bundle-plugins.sh [--darwin] OUT [NAME...]
#
# NAME...: the plugins to bundle, by default every one with a handler.
# --darwin: a universal macOS handler (Carapace.app, make app-bundle): built
# with cgo for darwin/arm64 and darwin/amd64, joined with lipo and signed ad
# hoc with codesign. codesign rewrites the file, so the pin is taken after
# it: the pin is of the bytes the bundle ships. Signing the app bundle
# afterwards must leave the handler as it is (no --deep).
#
# Environment: GO (default go), GOBUILDFLAGS (e.g. -trimpath), LDFLAGS (the
# -ldflags value), HANDLER_CGO (CGO_ENABLED of the handlers, default 1: make
# build links them as it links carapace).
# It runs with macOS's bash 3.2 too: no empty "${array[@]}" under set -u.
set -euo pipefail
cd "$(dirname "$0")/.."

darwin=false
if [[ ${1:-} == --darwin ]]; then
  darwin=true
  shift
fi
if (($# < 1)); then
  echo "usage: scripts/bundle-plugins.sh [--darwin] OUT [NAME...]" >&2
  exit 2
fi
out=$1
shift
names=("$@")
if ((${#names[@]} == 0)); then
  for main in plugins/*/handler/main.go; do
    [[ -e $main ]] || continue
    main=${main#plugins/}
    names+=("${main%%/*}")
  done
fi

GO=${GO:-go}
read -r -a buildflags <<<"${GOBUILDFLAGS:-}"
ldflags=${LDFLAGS:-}
cgo=${HANDLER_CGO:-1}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# build NAME DEST [GOOS GOARCH]: go build the plugin's handler.
build() {
  local name=$1 dest=$2
  if (($# == 4)); then
    echo "  go build $3/$4 plugins/$name/handler" >&2
    CGO_ENABLED=$cgo GOOS=$3 GOARCH=$4 MACOSX_DEPLOYMENT_TARGET=13.0 \
      "$GO" build ${buildflags[@]+"${buildflags[@]}"} -ldflags "$ldflags" -o "$dest" "./plugins/$name/handler"
  else
    echo "  go build plugins/$name/handler" >&2
    CGO_ENABLED=$cgo "$GO" build ${buildflags[@]+"${buildflags[@]}"} -ldflags "$ldflags" -o "$dest" "./plugins/$name/handler"
  fi
}

pins=()
for name in ${names[@]+"${names[@]}"}; do
  if [[ ! $name =~ ^[a-z][a-z0-9-]*$ || ! -f plugins/$name/handler/main.go ]]; then
    echo "bundle-plugins: $name is not a plugin with a handler (plugins/$name/handler/main.go)" >&2
    exit 1
  fi
  dir=$out/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  if $darwin; then
    tmp=$(mktemp -d)
    build "$name" "$tmp/handler-arm64" darwin arm64
    build "$name" "$tmp/handler-amd64" darwin amd64
    lipo -create -output "$dir/handler" "$tmp/handler-arm64" "$tmp/handler-amd64"
    lipo "$dir/handler" -verify_arch arm64 x86_64
    rm -rf "$tmp"
    codesign --force --sign - "$dir/handler"
  else
    build "$name" "$dir/handler"
  fi
  cp "plugins/$name/manifest.json" "$dir/"
  cp -R "plugins/$name/skills" "$dir/skills"
  pins+=("$name=$(sha256 "$dir/handler")")
done
(IFS=,; echo "${pins[*]+${pins[*]}}")
