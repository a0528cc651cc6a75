package deptest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// LinkedSymbols builds the main package in dir for linux/amd64 as the
// Makefile does, but with its symbol table kept, and returns the names of
// the functions and variables the linker kept: what the binary really
// links, where Checker sees the packages it imports.
func LinkedSymbols(t *testing.T, dir string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".bin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("symbols of %s: %v", dir, err)
	}
	names := make([]string, 0, len(syms))
	for _, s := range syms {
		names = append(names, s.Name)
	}
	return names
}
