# shellcheck shell=bash
# Functions the scripts share; source it (scripts/bundle-plugins.sh,
# scripts/check-bundle.sh). It runs with macOS's bash 3.2 too.

# sha256 prints the SHA-256 of a file in hex: sha256sum (GNU coreutils) or
# shasum (macOS).
sha256() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}
