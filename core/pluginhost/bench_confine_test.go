package pluginhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/egress"
)

// confineFixture confines f's handler as the loader does: its folder and
// executable read, its data written, an egress point with no host.
func confineFixture(f *fixture) {
	f.spec.Confine = &confine.Policy{Plugin: f.spec.Name, Exec: f.spec.Exec, Read: []string{f.spec.Dir}, Write: []string{f.spec.DataDir}}
	f.spec.Egress = &egress.Options{Plugin: f.spec.Name}
}

// BenchmarkStart10 starts 10 handlers (their teardown not counted), plain and confined (the
// launcher, Landlock, seccomp, the egress point): what confinement adds to
// a core's start with 10 plugins (docs/PERFORMANCE.md). "self" is the
// launcher as this test binary re-executed; "launcher" is
// bin/carapace-confine beside it, as `make build` lays it out.
func BenchmarkStart10(b *testing.B) {
	for _, mode := range []string{"plain", "self", "launcher"} {
		b.Run(mode, func(b *testing.B) {
			confined := mode != "plain"
			if confined && confine.Probe().Missing() != nil {
				b.Skip("no confinement here: ", confine.Probe().Missing())
			}
			if mode == "launcher" {
				exe, err := os.Executable()
				if err != nil {
					b.Fatal(err)
				}
				l := filepath.Join(filepath.Dir(exe), "carapace-confine")
				out, err := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", l, "github.com/carapace-dev/carapace/cmd/carapace-confine").CombinedOutput()
				if err != nil {
					b.Fatalf("build the launcher: %v\n%s", err, out)
				}
				b.Cleanup(func() { os.Remove(l) })
			}
			fs := make([]*fixture, 10)
			for i := range fs {
				fs[i] = newFixture(b, bin.plugin, fmt.Sprintf("bench-%d", i))
				if confined {
					confineFixture(fs[i])
				}
			}
			ctx := context.Background()
			for b.Loop() {
				ps := make([]*Process, len(fs))
				for i, f := range fs {
					p, err := Start(ctx, f.spec)
					if err != nil {
						b.Fatal(err)
					}
					ps[i] = p
				}
				b.StopTimer() // the start is measured, not the teardown
				for _, p := range ps {
					p.Kill()
					<-p.Done()
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkInvokeConfined is BenchmarkInvoke with the handler confined: a
// call crosses the same connection, so it should cost the same.
func BenchmarkInvokeConfined(b *testing.B) {
	if err := confine.Probe().Missing(); err != nil {
		b.Skip("no confinement here: ", err)
	}
	f := newFixture(b, bin.plugin, "bench")
	confineFixture(f)
	p := f.startInit(b, nil, nil)
	ctx := context.Background()
	req := request("echo", map[string]any{"text": "hello", "n": 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Invoke(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
