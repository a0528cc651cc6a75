package confine

import (
	"os/exec"
	"testing"
)

// BenchmarkLaunch measures a handler's start to its end, /usr/bin/true
// as the handler: directly (the baseline), through the test binary
// re-executed as the launcher (self mode, as a core without
// bin/carapace-confine beside it does), and through bin/carapace-confine.
// The launcher's cost is the difference to the baseline.
//
//	go test -run '^$' -bench Launch -benchtime 200x ./core/confine
func BenchmarkLaunch(b *testing.B) {
	requireKernel(b)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	p := Policy{Plugin: "bench", Exec: truePath}
	launcher := buildLauncher(b)
	for _, mode := range []string{"direct", "self", "launcher"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "launcher" {
				useLauncher(b, launcher)
			}
			for b.Loop() {
				cmd := exec.Command(truePath)
				if mode != "direct" {
					if err := Wrap(cmd, p); err != nil {
						b.Fatal(err)
					}
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v: %s", mode, err, out)
				}
			}
		})
	}
}
