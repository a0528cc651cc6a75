package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/prove"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
)

// proveThrough asks the running core for a proof of sides over the
// control socket, as `carapace doctor --prove` does, and logs each check.
func proveThrough(t *testing.T, c *testCore, sides ...string) api.ProveReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var streamed int
	rep, err := c.Client.Prove(ctx, api.ProveRequest{Sides: sides}, func(ev api.ProveEvent) {
		if ev.Check != nil {
			streamed++
		}
	})
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	if streamed != len(rep.Checks) {
		t.Errorf("%d checks streamed, %d in the report", streamed, len(rep.Checks))
	}
	for _, ch := range rep.Checks {
		t.Logf("%-5v %s: %s [control: %s]", ch.Passed, ch.Name, ch.Detail, ch.Control)
	}
	return rep
}

// byName indexes a report's checks.
func byName(rep api.ProveReport) map[string]api.ProveCheck {
	m := map[string]api.ProveCheck{}
	for _, c := range rep.Checks {
		m[c.Name] = c
	}
	return m
}

// The plugin side through the real core: the probe plugin, the test
// binary re-executed as its handler, confined by the loader's own code
// path, keeps every promise with a control that worked; started
// unconfined on purpose (the proof's negative control), every promise
// confinement keeps fails.
func TestProvePluginSide(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, "the kernel cannot confine plugins: "+err.Error())
	}
	for _, tc := range []struct {
		name   string
		faults prove.Faults
		failed []string // the checks that must fail; every other must pass
	}{
		{"confined", prove.Faults{}, nil},
		{"unconfined on purpose", prove.Faults{PluginUnconfined: true}, []string{
			"plugin: starts confined", "plugin: cannot read the credentials", "plugin: cannot read the core's files",
			"plugin: cannot read a file outside its folders", "plugin: writes only in its data folder",
			"plugin: cannot reach the control socket", "plugin: cannot signal the core", "plugin: has no network of its own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCoreWith(t, coreOptions{ProveFaults: tc.faults})
			rep := proveThrough(t, c, api.ProveSidePlugin)
			if len(rep.Checks) != 9 {
				t.Fatalf("%d checks, want 9", len(rep.Checks))
			}
			mustFail := map[string]bool{}
			for _, n := range tc.failed {
				mustFail[n] = true
				if _, ok := byName(rep)[n]; !ok {
					t.Errorf("no check %q", n)
				}
			}
			for _, ch := range rep.Checks {
				if ch.Side != api.ProveSidePlugin {
					t.Errorf("%s: side %q", ch.Name, ch.Side)
				}
				if ch.Passed == mustFail[ch.Name] {
					t.Errorf("%s: passed=%v, want %v: %s [control: %s]", ch.Name, ch.Passed, !mustFail[ch.Name], ch.Detail, ch.Control)
				}
				if strings.Contains(ch.Control, "FAILED") {
					t.Errorf("%s: the control failed: %s", ch.Name, ch.Control)
				}
			}
			// Nothing of the probe plugin is left: its folders, its canaries.
			for _, p := range []string{c.Home.Path("run", "prove"), c.Home.DataDir(prove.PluginName),
				filepath.Join(c.Home.CredentialsDir(), "plugins", keychain.LLMPlugin)} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s is left behind (%v)", p, err)
				}
			}
		})
	}
}
