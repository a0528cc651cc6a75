package deptest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Static builds the main package in the current directory for linux/amd64
// and linux/arm64 with cgo off, as the Makefile does, and fails the test
// if either binary has a dynamic loader: the static binaries (bin/ipc and
// carapace-probe, which run in any image; carapace-confine, which starts
// alone beside the core) must run with nothing else installed.
func Static(t *testing.T, name string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s for linux/%s: %v\n%s", name, arch, err, b)
		}
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("linux/%s %s is dynamically linked", arch, name)
			}
		}
		f.Close()
	}
}
