package testutil

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that imports this
// package: golden files are rewritten from the current output.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

// Update reports whether the tests run with -update, for tests that keep
// golden files Golden does not cover (a whole tree, say).
func Update() bool { return *update }

// Golden compares got with the golden file at path and reports a
// difference as a test error. With -update it first writes got there,
// creating the folder.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
