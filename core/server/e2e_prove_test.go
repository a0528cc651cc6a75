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

// The whole proof through the real core, as `carapace doctor --prove`
// asks for it: the probe plugin under the real confinement and one
// container of the offline test image started by Docker exactly as a
// session's, with the static probe mounted in. Every promise holds, each
// with a control that worked, and the proof leaves nothing behind.
func TestProveThroughTheCore(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, "the kernel cannot confine plugins: "+err.Error())
	}
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, ""), ProbeBinary: bins.probe})
	rep := proveThrough(t, c)
	if rep.Engine != "docker" {
		t.Errorf("engine %q", rep.Engine)
	}
	sides := map[string]int{}
	for _, ch := range rep.Checks {
		sides[ch.Side]++
		if !ch.Passed || strings.Contains(ch.Control, "FAILED") {
			t.Errorf("FAILED %s: %s [control: %s]", ch.Name, ch.Detail, ch.Control)
		}
	}
	if sides[api.ProveSidePlugin] != 9 || sides[api.ProveSideBox] != 9 {
		t.Errorf("checks by side %v, want 9 and 9", sides)
	}
	checks := byName(rep)
	// What the checks rest on, spelled out: a sample of each kind.
	for name, want := range map[string]string{
		"box: no route out: public addresses":                 "TCP 1.1.1.1:443",
		"box: no route out: the host and the engine's bridge": "besides its own controls",
		"box: no model key inside":                            "found no key-shaped string",
		"box: the model API only through the core's proxy":    "directly: TCP api.anthropic.com:443",
		"box: not root": "uid ",
	} {
		if !strings.Contains(checks[name].Detail, want) {
			t.Errorf("%s: detail %q lacks %q", name, checks[name].Detail, want)
		}
	}
	if ctl := checks["box: the model API only through the core's proxy"].Control; !strings.Contains(ctl, "HTTP/1.1 403") {
		t.Errorf("the relay's answer is not the proxy's refusal of the probe's path: %s", ctl)
	}
	if _, err := os.Stat(c.Home.Path("groups", prove.BoxGroup)); !os.IsNotExist(err) {
		t.Errorf("the proof left its group's folder behind: %v", err)
	}
	// The box was a session like any other: opened and closed, audited.
	var opened, proved bool
	for _, e := range c.Audit(t) {
		opened = opened || (e.Group == prove.BoxGroup && e.Session != "")
		proved = proved || (e.Stage == "core" && e.Reason == "doctor --prove: 18 of 18 promises held")
	}
	if !opened || !proved {
		t.Errorf("the audit log: a trace of the proof's session in group %s %v, the proof's outcome %v", prove.BoxGroup, opened, proved)
	}
	if got, err := c.Client.Sessions(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("sessions after the proof: %v %v", got, err)
	}
}

// The box side's negative control: the same container run as root and
// with a key in its environment, on purpose, fails exactly the promises
// that covers — "not root" says uid 0, "no model key inside" names where
// the key is — so that a check that could not fail is not what passes
// above.
func TestProveBoxFaultsFail(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, ""), ProbeBinary: bins.probe,
		ProveFaults: prove.Faults{BoxRoot: true, BoxKeyInEnv: true}})
	rep := proveThrough(t, c, api.ProveSideBox)
	checks := byName(rep)
	if len(checks) != 9 || !checks["box: starts as an agent session's"].Passed {
		t.Fatalf("the box did not run to the end: %+v", rep)
	}
	if ch := checks["box: not root"]; ch.Passed || !strings.Contains(ch.Detail, "uid 0") {
		t.Errorf("run as root, not root: %+v", ch)
	}
	if ch := checks["box: no model key inside"]; ch.Passed || !strings.Contains(ch.Detail, "environment CARAPACE_PROVE_FAULT") {
		t.Errorf("a key in the environment, no model key inside: %+v", ch)
	}
	for _, name := range []string{"box: no route out: public addresses", "box: no route out: the host and the engine's bridge", "box: no DNS",
		"box: the model API only through the core's proxy"} {
		if !checks[name].Passed {
			t.Errorf("root and a key break nothing of the network, yet %s failed: %+v", name, checks[name])
		}
	}
}
