package pluginhost

import (
	"context"
	"fmt"
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

// BenchmarkStart10 starts and stops 10 handlers, plain and confined (the
// launcher, Landlock, seccomp, the egress point): what confinement adds to
// a core's start with 10 plugins (docs/PERFORMANCE.md).
func BenchmarkStart10(b *testing.B) {
	for _, confined := range []bool{false, true} {
		b.Run(fmt.Sprintf("confined=%v", confined), func(b *testing.B) {
			if confined && confine.Probe().Missing() != nil {
				b.Skip("no confinement here: ", confine.Probe().Missing())
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
				for _, p := range ps {
					p.Kill()
					<-p.Done()
				}
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
