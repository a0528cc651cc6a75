package deptest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// These tests check the checker on this package (which imports os/exec and
// encoding/json, and through os reaches syscall) and on the standard
// library, whose imports do not change under them.

const self = "github.com/carapace-dev/carapace/internal/testutil/deptest"

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		c    Checker
		want [][]string // for each problem, in order, substrings it contains; nil: no problem
	}{
		{"clean", Checker{Forbidden: map[string]string{"net/http": "no HTTP"}, ForbiddenImports: map[string]string{"syscall": "not directly"}}, nil},
		{"direct import", Checker{Forbidden: map[string]string{"os/exec": "no processes"}},
			[][]string{{self + " links os/exec (", "which it must not: no processes\n\timported through " + self + " -> os/exec"}}},
		{"through another package", Checker{Forbidden: map[string]string{"syscall": "no raw system calls"}},
			[][]string{{"links syscall (", "imported through " + self + " -> ", " -> syscall"}}},
		{"own imports", Checker{ForbiddenImports: map[string]string{"encoding/json": "no JSON here", "slices": "no slices"}},
			[][]string{{self + " imports encoding/json (", "no JSON here"}, {self + " imports slices (", "no slices"}}},
		{"allowed imports", Checker{Package: "errors", AllowedImports: []string{"internal/...", "unsafe"}}, nil},
		{"an import not allowed", Checker{AllowedImports: []string{"os/...", "debug/elf", "encoding/json", "bytes", "errors", "fmt", "io", "path/filepath", "slices", "strings", "sync"}},
			[][]string{{self + " imports testing (", "which is not among its allowed imports"}}},
		{"excepted", Checker{Forbidden: map[string]string{"os/...": "no os"}, ForbiddenImports: map[string]string{"os/exec": "x"},
			Except: []string{"os", "os/..."}}, nil},
		{"excepted in part", Checker{Forbidden: map[string]string{"os/...": "no os"}, Except: []string{"os"}},
			[][]string{{self + " links os/exec (", "no os"}}},
		{"wanted but missing", Checker{Want: []string{"os", "net/http"}}, [][]string{{self + " does not link net/http ("}}},
		{"too many", Checker{MaxDeps: 1}, [][]string{{"packages (", "more than the 1 allowed"}}},
		{"cgo", Checker{Package: "runtime/cgo", CGO: "1", NoCgo: true}, [][]string{{"runtime/cgo links runtime/cgo (", "CGO_ENABLED=1), which has cgo files: "}}},
		{"no cgo without cgo", Checker{Package: "net", CGO: "0", NoCgo: true}, nil},
		{"the target's files", Checker{Package: "os", GOOS: "windows", GOARCH: "amd64", Want: []string{"internal/syscall/windows"}}, nil},
		{"another target's files", Checker{Package: "os", GOOS: "linux", GOARCH: "arm64", Want: []string{"internal/syscall/windows"}},
			[][]string{{"os does not link internal/syscall/windows (linux/arm64)"}}},
		{"tags", Checker{Tags: []string{"sqlite_fts5"}, Forbidden: map[string]string{"os/exec": "x"}}, [][]string{{", tags sqlite_fts5)"}}},
		{"a pattern: each package it matches", Checker{Package: "container/...", Forbidden: map[string]string{"sort": "no sorting"}},
			[][]string{{"container/heap links sort (", "no sorting\n\timported through container/heap -> sort"}}},
		{"a pattern: each package's own imports", Checker{Package: "container/...", ForbiddenImports: map[string]string{"unsafe": "no unsafe", "sort": "no sorting"}},
			[][]string{{"container/heap imports sort ("}}},
		{"a pattern: wanted in any", Checker{Package: "container/...", Want: []string{"sort", "net/http"}},
			[][]string{{"container/... does not link net/http ("}}},
		{"no programs", Checker{Package: "github.com/carapace-dev/carapace/cmd/ipc/...", NoMain: true},
			[][]string{{"cmd/ipc is a program (package main)"}}},
		{"no programs among libraries", Checker{Package: "container/...", NoMain: true}, nil},
		{"within its layer", Checker{Within: []string{"github.com/carapace-dev/carapace/internal/testutil/..."}}, nil},
		{"outside its layer, itself", Checker{Within: []string{"github.com/carapace-dev/carapace/core/home"}},
			[][]string{{self + " is outside its layer (", "it may be only github.com/carapace-dev/carapace/core/home of this module"}}},
		{"outside its layer, through another", Checker{Package: "github.com/carapace-dev/carapace/internal/appstate", Within: []string{"github.com/carapace-dev/carapace/internal/..."}},
			[][]string{{"internal/appstate links github.com/carapace-dev/carapace/core/home (", "outside its layer", "imported through github.com/carapace-dev/carapace/internal/appstate -> github.com/carapace-dev/carapace/core/home"}}},
		{"a forbidden package that is gone", Checker{Forbidden: map[string]string{
			"github.com/carapace-dev/carapace/core/nosuch":         "renamed",
			"github.com/carapace-dev/carapace/core/plugin/...":     "exists",
			"github.com/carapace-dev/carapace/internal/nosuch/...": "renamed",
		}, Within: []string{"github.com/carapace-dev/carapace/internal/...", "github.com/carapace-dev/carapace/app/nosuch"}}, [][]string{
			{"allowed package github.com/carapace-dev/carapace/app/nosuch does not exist"},
			{"forbidden package github.com/carapace-dev/carapace/core/nosuch does not exist"},
			{"forbidden package github.com/carapace-dev/carapace/internal/nosuch/... does not exist"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Problems()
			if err != nil {
				t.Fatal(err)
			}
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				for _, w := range tt.want[i] {
					ok = ok && strings.Contains(got[i], w)
				}
			}
			if !ok {
				t.Errorf("problems:\n%s\nwant %d, containing %q", strings.Join(got, "\n"), len(tt.want), tt.want)
			}
		})
	}
}

// TestForbiddenTree: "path/..." forbids path and every package below it,
// and nothing else.
func TestForbiddenTree(t *testing.T) {
	got, err := Checker{Forbidden: map[string]string{"encoding/...": "no encodings"}}.Problems()
	if err != nil {
		t.Fatal(err)
	}
	var json, encoding bool
	for _, p := range got {
		pkg := strings.Fields(strings.TrimPrefix(p, self+" links "))[0]
		if pkg != "encoding" && !strings.HasPrefix(pkg, "encoding/") {
			t.Errorf("reported %s, outside encoding/...: %s", pkg, p)
		}
		json = json || pkg == "encoding/json"
		encoding = encoding || pkg == "encoding"
	}
	if !json || !encoding {
		t.Errorf("encoding/... did not report encoding and encoding/json:\n%s", strings.Join(got, "\n"))
	}
}

// TestExceptTree: an Except entry "path/..." lifts the rule for path and
// the packages below it, and for nothing else.
func TestExceptTree(t *testing.T) {
	got, err := Checker{Forbidden: map[string]string{"encoding/...": "no encodings"}, Except: []string{"encoding/json/..."}}.Problems()
	if err != nil {
		t.Fatal(err)
	}
	var encoding bool
	for _, p := range got {
		pkg := strings.Fields(strings.TrimPrefix(p, self+" links "))[0]
		if pkg == "encoding/json" || strings.HasPrefix(pkg, "encoding/json/") {
			t.Errorf("reported %s, which is excepted: %s", pkg, p)
		}
		encoding = encoding || pkg == "encoding"
	}
	if !encoding {
		t.Errorf("encoding/... except encoding/json/... did not report encoding:\n%s", strings.Join(got, "\n"))
	}
}

// TestPackages lists the packages of a pattern, and fails for a pattern
// go list refuses.
func TestPackages(t *testing.T) {
	got, err := Packages("encoding/...")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "encoding/json") || !slices.Contains(got, "encoding") || slices.Contains(got, "os") {
		t.Errorf("Packages(encoding/...) = %q; want encoding and encoding/json, not os", got)
	}
	if _, err := Packages("./nosuch"); err == nil || !strings.Contains(err.Error(), "go list") {
		t.Errorf("a pattern go list refuses: %v; want go list's error", err)
	}
}

func TestProblemsErrors(t *testing.T) {
	if _, err := (Checker{}).Problems(); err == nil || !strings.Contains(err.Error(), "checks nothing") {
		t.Errorf("an empty Checker: %v; want an error", err)
	}
	_, err := Checker{Package: "./nosuch", Want: []string{"os"}}.Problems()
	if err == nil || !strings.Contains(err.Error(), "go list") {
		t.Errorf("a package that does not exist: %v; want go list's error", err)
	}
}

// recorder is a testing.TB that records what Check reports.
type recorder struct {
	testing.TB
	errors []string
	fatal  string
}

func (r *recorder) Helper()               {}
func (r *recorder) Error(args ...any)     { r.errors = append(r.errors, fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any)     { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Errorf(string, ...any) { panic("not used by Check") }

func TestCheckReportsEachProblem(t *testing.T) {
	r := &recorder{TB: t}
	Checker{
		Forbidden: map[string]string{"os/exec": "no processes"},
		Want:      []string{"net/http"},
	}.Check(r)
	if len(r.errors) != 2 || !strings.Contains(r.errors[0], "links os/exec") || !strings.Contains(r.errors[1], "does not link net/http") || r.fatal != "" {
		t.Errorf("Check reported %q, fatal %q; want the forbidden and the missing package", r.errors, r.fatal)
	}
	r = &recorder{TB: t}
	Checker{}.Check(r)
	if len(r.errors) != 0 || !strings.Contains(r.fatal, "checks nothing") {
		t.Errorf("Check of an empty Checker reported %q, fatal %q", r.errors, r.fatal)
	}
}
