package prove

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
)

// proofHome is a home with what a running core has: its config, audit
// log, a model key in the file store and a control socket that accepts.
func proofHome(t *testing.T) home.Dir {
	t.Helper()
	dir, err := os.MkdirTemp("", "pv") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := home.Dir(dir)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{h.Config(): "[core]\n", h.AuditLog(): "{}\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte("sk-ant-api03-prove-test")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", h.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\n\r\n"))
			c.Close()
		}
	}()
	return h
}

func provePluginSide(t *testing.T, f Faults) api.ProveReport {
	t.Helper()
	sup := confine.Probe()
	if err := sup.Missing(); err != nil {
		testutil.Missing(t, "the kernel cannot confine plugins: "+err.Error())
	}
	h := proofHome(t)
	p := New(Options{Home: h, Support: sup, Faults: f})
	var stages []string
	rep, err := p.Run(context.Background(), api.ProveRequest{Sides: []string{api.ProveSidePlugin}}, func(ev api.ProveEvent) {
		if ev.Stage != "" {
			stages = append(stages, ev.Stage)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		t.Logf("%-5v %s: %s [control: %s]", c.Passed, c.Name, c.Detail, c.Control)
	}
	if len(stages) != 2 {
		t.Errorf("stages %q, want the start and the probing", stages)
	}
	for _, d := range []string{h.Path("run", "prove"), h.DataDir(PluginName)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
	return rep
}

// The probe plugin, run by the test binary's own init under the real
// confinement, keeps every promise, each with a control that worked.
func TestPluginSideConfined(t *testing.T) {
	rep := provePluginSide(t, Faults{})
	want := []string{checkPluginStarts, checkPluginCredentials, checkPluginCoreFiles, checkPluginCanary, checkPluginWrites,
		checkPluginControl, checkPluginSignal, checkPluginNetwork, checkPluginUndeclared}
	var got []string
	for _, c := range rep.Checks {
		got = append(got, c.Name)
		if !c.Passed || c.Side != api.ProveSidePlugin || strings.Contains(c.Control, "FAILED") {
			t.Errorf("FAILED %s: %s [control: %s]", c.Name, c.Detail, c.Control)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("checks %q, want %q", got, want)
	}
	if c := rep.Checks[1]; !strings.Contains(c.Detail, keychain.LLMKeyAPI) {
		t.Errorf("the credentials check did not try the model key's file: %s", c.Detail)
	}
}

// The negative control of the proof itself: the same plugin started
// unconfined fails every promise that confinement keeps — and only the
// egress point's, which holds confined or not, still passes.
func TestPluginSideUnconfinedFails(t *testing.T) {
	rep := provePluginSide(t, Faults{PluginUnconfined: true})
	stillHolds := map[string]bool{checkPluginUndeclared: true}
	for _, c := range rep.Checks {
		if c.Passed != stillHolds[c.Name] {
			t.Errorf("unconfined, %s passed=%v, want %v: %s [control: %s]", c.Name, c.Passed, stillHolds[c.Name], c.Detail, c.Control)
		}
		if strings.Contains(c.Control, "FAILED") {
			t.Errorf("unconfined, the control of %s failed: %s", c.Name, c.Control)
		}
	}
	if len(rep.Checks) != 9 {
		t.Errorf("%d checks, want 9", len(rep.Checks))
	}
	if rep.Failed() != 8 {
		t.Errorf("%d failed, want 8", rep.Failed())
	}
}
