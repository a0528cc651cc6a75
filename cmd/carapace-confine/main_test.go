package main

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDependencies pins what the launcher may link, for the host and the
// Linux targets: no cgo (Landlock on ABI < 8 then goes through Go's own
// AllThreadsSyscall, not libpsx's C), no HTTP stack, few packages.
func TestDependencies(t *testing.T) {
	const why = "the launcher only confines itself and execs the handler"
	for _, target := range [][2]string{{"", ""}, {"linux", "amd64"}, {"linux", "arm64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			CGO:    "0",
			Forbidden: map[string]string{
				"net/http":    why,
				"net":         why,
				"crypto/tls":  why,
				"runtime/cgo": "it must start fast and alone, beside the core",
				"plugin":      "it must not load code",
			},
			NoCgo:   true,
			MaxDeps: 120,
			Want: []string{
				"github.com/carapace-dev/carapace/core/confine",
				"github.com/landlock-lsm/go-landlock/landlock",
				"github.com/elastic/go-seccomp-bpf",
			},
		}.Check(t)
	}
}

// TestStaticBinary builds the launcher as the Makefile does and checks it
// has no dynamic loader.
func TestStaticBinary(t *testing.T) { deptest.Static(t, "carapace-confine") }
