package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule writes a module with no dependencies into a new directory
// and returns the directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/dc\n\ngo 1.26\n"
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cgoFile is a darwin-only cgo file; bad is spliced in on line 12.
func cgoFile(bad string) string {
	return `//go:build darwin

package dc

/*
#include <stdlib.h>
static int answer(void) { return 42; }
*/
import "C"

func answer() int { return int(C.answer()) + Shared() }
` + bad + "\n"
}

// The files of the test module that are fine everywhere.
const (
	shared = "package dc\n\n// Shared is used by the darwin files.\nfunc Shared() int { return 1 }\n"
	// A file built only with cgo, without importing "C" itself.
	cgoTagged = "//go:build darwin && cgo\n\npackage dc\n\nvar tagged = answer() + Shared()\n"
	// Built for Linux only: an error here is not darwin's business.
	linuxOnly = "//go:build linux\n\npackage dc\n\nvar linux int = \"not darwin's problem\"\n"
	// A file that a cgo-less darwin build would use instead.
	noCgo = "//go:build darwin && !cgo\n\npackage dc\n\nvar nocgo int = \"never selected with cgo on\"\n"
)

// TestCheckModule checks a module with a deliberate error in each kind
// of darwin file, then the same module with the errors fixed.
func TestCheckModule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		broken   map[string]string // the files with errors
		errors   []string          // each is a prefix of one reported error, in order
		cgoFiles int               // files with cgo, once fixed
	}{
		{
			name: "every kind of darwin file",
			broken: map[string]string{
				// A type error in a file that imports "C".
				"c_darwin.go": cgoFile(`var broken int = "string"`),
				// An undefined name in a file built only with cgo.
				"k.go": strings.Replace(cgoTagged, "Shared()", "Missing()", 1),
				// A type error in a darwin test file.
				"c_darwin_test.go": "package dc\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { t.Log(answer() + \"x\") }\n",
				// A syntax error in an imported package's darwin file.
				"sub/s_darwin.go": "package sub\n\nfunc {\n",
			},
			errors: []string{
				"c_darwin.go:12:18: cannot use \"string\"",
				"c_darwin_test.go:5:34: invalid operation",
				"k.go:5:25: undefined: Missing",
				filepath.Join("sub", "s_darwin.go") + ":3:6: expected 'IDENT'",
			},
			cgoFiles: 2, // c_darwin.go, k.go (c_darwin_test.go is darwin-only, not cgo-only)
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{
				"a.go":             shared,
				"i.go":             "package dc\n\nimport _ \"example.com/dc/sub\"\n",
				"c_darwin.go":      cgoFile(""),
				"k.go":             cgoTagged,
				"c_darwin_test.go": "package dc\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { t.Log(answer() + 1) }\n",
				"sub/s_darwin.go":  "package sub\n\nfunc F() {}\n",
				"l_linux.go":       linuxOnly,
				"n.go":             noCgo,
			}
			fixed := writeModule(t, maps.Clone(files))
			maps.Copy(files, tt.broken)
			broken := writeModule(t, files)

			res, err := Check(t.Context(), Options{Dir: broken, Tests: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) != len(tt.errors) {
				t.Fatalf("errors:\n%s\nwant %d starting %q", strings.Join(res.Errors, "\n"), len(tt.errors), tt.errors)
			}
			for i, want := range tt.errors {
				if !strings.HasPrefix(res.Errors[i], want) {
					t.Errorf("error %q, want it to start with %q", res.Errors[i], want)
				}
			}

			res, err = Check(t.Context(), Options{Dir: fixed, Tests: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) != 0 {
				t.Errorf("errors once fixed:\n%s", strings.Join(res.Errors, "\n"))
			}
			if res.Module != "example.com/dc" || res.Packages != 2 || res.CgoFiles != tt.cgoFiles {
				t.Errorf("checked %d packages of %q, %d files with cgo; want 2 of example.com/dc, %d", res.Packages, res.Module, res.CgoFiles, tt.cgoFiles)
			}
		})
	}
}

// TestRun checks the command's output and exit status.
func TestRun(t *testing.T) {
	good := writeModule(t, map[string]string{"a.go": shared, "c_darwin.go": cgoFile("")})
	bad := writeModule(t, map[string]string{"a.go": shared, "c_darwin.go": cgoFile(`var broken int = "string"`)})
	tests := []struct {
		name           string
		dir            string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"clean", good, []string{"-test=false", "-v", "./..."}, 0, "darwincheck: 1 packages of example.com/dc type-checked for darwin/arm64 (1 files with cgo)\n", "errors in dependencies; go list"},
		{"amd64", good, []string{"-test=false", "-arch", "amd64"}, 0, "type-checked for darwin/amd64", ""},
		{"type error", bad, []string{"-test=false"}, 1, "darwincheck: 1 packages", "c_darwin.go:12:18: cannot use"},
		{"bad flag", good, []string{"-bogus"}, 2, "", "usage: go run ./cmd/darwincheck"},
		{"bad arch", good, []string{"-arch", "vax"}, 2, "", `unknown GOARCH "vax"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.dir)
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s\nwant %q and %q", code, tt.code, stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
		})
	}
}

// TestThisRepoKeychain type-checks ./keychain of this repository for
// darwin/arm64: keychain_darwin.go (darwin && cgo, on
// github.com/keybase/go-keychain, itself cgo) and its test must check.
func TestThisRepoKeychain(t *testing.T) {
	t.Parallel()
	res, err := Check(t.Context(), Options{Dir: filepath.Join("..", ".."), Patterns: []string{"./keychain"}, Tests: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 0 {
		t.Errorf("type errors in ./keychain for darwin/arm64:\n%s", strings.Join(res.Errors, "\n"))
	}
	if res.Module != "github.com/carapace-dev/carapace" || res.Packages != 1 {
		t.Errorf("checked %d packages of %q, want 1 of github.com/carapace-dev/carapace", res.Packages, res.Module)
	}
	// keychain_darwin.go and keychain_darwin_test.go.
	if res.CgoFiles != 2 {
		t.Errorf("%d files with cgo in ./keychain, want 2 (keychain_darwin.go and its test)", res.CgoFiles)
	}
	// runtime/cgo and go-keychain were checked with fake cgo.
	if res.AllCgoPackages < 2 {
		t.Errorf("%d packages with cgo files among the dependencies, want runtime/cgo and go-keychain", res.AllCgoPackages)
	}
}
