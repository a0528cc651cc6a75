package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/prove/boxprobe"
	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDependencies: the probe runs in the agent's image, which has
// nothing for it: no cgo, no HTTP stack (the relay check is raw TCP),
// few packages, and nothing of the core but its own package.
func TestDependencies(t *testing.T) {
	const why = "the probe is mounted into the agent's container: small and static"
	for _, target := range [][2]string{{"", ""}, {"linux", "amd64"}, {"linux", "arm64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			CGO:    "0",
			Forbidden: map[string]string{
				"net/http":    why,
				"crypto/tls":  why,
				"runtime/cgo": why,
				"plugin":      "it must not load code",
				"github.com/carapace-dev/carapace/core/api":    "the probe only observes; the core judges",
				"github.com/carapace-dev/carapace/core/plugin": why,
			},
			NoCgo:   true,
			MaxDeps: 150,
			Want:    []string{"github.com/carapace-dev/carapace/core/prove/boxprobe"},
		}.Check(t)
	}
}

// TestStaticBinary builds the probe as the Makefile does and checks it
// has no dynamic loader: it runs in any image.
func TestStaticBinary(t *testing.T) { deptest.Static(t, "carapace-probe") }

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"{", "x"}, {"not json"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "carapace-probe") {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

// On the host (no relay, the host's own network) the probe still runs to
// the end and prints only observations the core can parse; what they say
// here is the host's business, the box is tested through the core.
func TestRunPrintsObservations(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	plan := `{"nonce":"n1","relay_path":"/v1/x","writable":["` + dir + `"],"read_only":["/nonexistent"],"key_prefix":"sk-ant-","scan_roots":["` + dir + `"]}`
	if code := run([]string{plan}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	obs, err := boxprobe.Parse(out.String())
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range obs {
		kinds[o.Probe]++
	}
	for _, k := range []string{boxprobe.ProbeRelay, boxprobe.ProbeLoopbackTCP, boxprobe.ProbeLoopbackDNS, boxprobe.ProbeWrite,
		boxprobe.ProbeChownOther, boxprobe.ProbeChownSelf, boxprobe.ProbeScan} {
		if kinds[k] == 0 {
			t.Errorf("no %s observation in:\n%s", k, out.String())
		}
	}
	if strings.Count(out.String(), "\n") != len(obs) {
		t.Errorf("lines that are not observations:\n%s", out.String())
	}
}
