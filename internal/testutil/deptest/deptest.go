// Package deptest is the one mechanism behind the project's dependency
// tests: it asks `go list -deps` what a package links for a given target
// (GOOS, GOARCH, build tags, cgo) and fails the test when the package
// links what it must not. cmd/ipc stays small and static with it, and the
// command line and the plugin test harness stay clients of the core
// rather than copies of it.
//
// A Checker lists the whole import graph of the package, not just its own
// imports: a forbidden package reached through three others fails as
// surely as one imported directly, and the failure shows the import chain
// that brings it in. Test-only imports are not part of a binary, so they are
// not listed.
//
// A Checker may also check a whole folder of packages at once (a pattern
// such as "github.com/carapace-dev/carapace/core/..."), which is how the
// module's layers are pinned: each layer may link the layers below it
// (Within) and nothing above (Forbidden).
package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Checker describes what one package, or every package of a pattern, may
// link for one target. The zero value of each field checks nothing; Check
// fails a Checker that checks nothing at all.
type Checker struct {
	// Package is the package to check: an import path, or a directory
	// relative to the test's own (go test runs a test in its package's
	// directory). "" means ".", the package under test. A pattern with
	// "..." checks every package it matches, each against every rule
	// below; a problem names the matched package it is found in.
	Package string
	// GOOS and GOARCH are the target; "" keeps the environment's (the
	// host's, unless the test runs with GOOS or GOARCH set).
	GOOS, GOARCH string
	// CGO is CGO_ENABLED for the listing: "0", "1", or "" for the
	// environment's. cgo changes which files, and so which imports, a
	// package has.
	CGO string
	// Tags are the build tags; nil keeps those of GOFLAGS (the Makefile
	// sets sqlite_fts5 there).
	Tags []string
	// Forbidden maps an import path the package must not link to the reason
	// why. A path ending in "/..." forbids the packages below it too.
	Forbidden map[string]string
	// ForbiddenImports is Forbidden for the package's own imports only:
	// for what it must not use itself, although a dependency may.
	ForbiddenImports map[string]string
	// Except lists packages (with "/..." as in Forbidden) that Forbidden
	// and ForbiddenImports do not cover: the exceptions of a rule such as
	// "nothing of core/ but the control API", written as core/... forbidden
	// except core/control and core/api, which a forbid-list of each core
	// package would let lag behind a new one.
	Except []string
	// AllowedImports, when not nil, lists every package the package may
	// import itself (with "/..." as in Forbidden): an allow-list for a
	// package that must stay small, where a forbid-list would always lag.
	AllowedImports []string
	// Within, when not nil, lists the only packages of the checked
	// package's own module that it may link, directly or not (with "/..."
	// as in Forbidden): the rule of a layer, which may use the layers below
	// it and nothing else of the module. Other modules are not limited.
	Within []string
	// Want lists packages that must be linked: a guard that the listing
	// sees what it should (a Checker whose Package names nothing useful
	// would otherwise pass).
	Want []string
	// NoCgo fails the check when any linked package has cgo files.
	NoCgo bool
	// NoMain fails the check when a checked package is a program (package
	// main): for a folder that must hold libraries only.
	NoMain bool
	// MaxDeps is the most packages the package may link, itself included
	// (for a pattern: all the matched packages link together); 0 means no
	// limit.
	MaxDeps int
}

// listed is the part of `go list -json` output a Checker reads.
type listed struct {
	ImportPath string
	Name       string
	Imports    []string
	CgoFiles   []string
	Module     *struct{ Path, Dir string }
	DepOnly    bool // listed only as a dependency, not matched by the pattern
}

// listFields are the fields asked of go list: those of listed.
const listFields = "ImportPath,Name,Imports,CgoFiles,Module,DepOnly"

// Check runs the checks and reports every violation as an error of t, or
// fails t at once when the packages cannot be listed.
func (c Checker) Check(t testing.TB) {
	t.Helper()
	problems, err := c.Problems()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// Problems runs the checks and returns one line per violation, nil when
// there is none. The error is for a check that could not run: go list
// failed, or the Checker checks nothing.
func (c Checker) Problems() ([]string, error) {
	if len(c.Forbidden) == 0 && len(c.ForbiddenImports) == 0 && c.AllowedImports == nil && c.Within == nil && len(c.Want) == 0 && !c.NoCgo && !c.NoMain && c.MaxDeps == 0 {
		return nil, errors.New("deptest: the Checker checks nothing")
	}
	pkgs, err := c.list("-deps", c.pkg())
	if err != nil {
		return nil, err
	}
	g := newGraph(pkgs)
	if len(g.roots) == 0 {
		return nil, fmt.Errorf("deptest: go list -deps %s listed nothing", c.pkg())
	}
	target := sync.OnceValue(c.target) // go env runs only for a message
	problems := c.linked(g, target)
	for _, root := range g.roots {
		problems = append(problems, c.own(root, target)...)
	}
	name := c.pkg()
	if len(g.roots) == 1 {
		name = g.roots[0].ImportPath
	}
	for _, w := range c.Want {
		if g.byPath[w] == nil {
			problems = append(problems, fmt.Sprintf("%s does not link %s (%s): the dependency check may not see what it should",
				name, w, target()))
		}
	}
	if c.MaxDeps > 0 && len(pkgs) > c.MaxDeps {
		problems = append(problems, fmt.Sprintf("%s links %d packages (%s), more than the %d allowed",
			name, len(pkgs), target(), c.MaxDeps))
	}
	return append(problems, c.missing(g.roots[0])...), nil
}

// graph is a listing: every package by path, and the packages checked.
type graph struct {
	pkgs   []listed // in go list's order: dependencies first
	byPath map[string]*listed
	// roots are the packages checked: those the pattern matched (go list
	// -deps lists dependencies before the packages that import them: with
	// a single package, it comes last).
	roots []*listed
}

func newGraph(pkgs []listed) graph {
	g := graph{pkgs: pkgs, byPath: make(map[string]*listed, len(pkgs))}
	for i := range pkgs {
		g.byPath[pkgs[i].ImportPath] = &pkgs[i]
		if !pkgs[i].DepOnly {
			g.roots = append(g.roots, &pkgs[i])
		}
	}
	return g
}

// linked checks every package linked: Forbidden, Within and NoCgo. Each
// problem names the checked package that links it, and a Forbidden one
// the import chain.
func (c Checker) linked(g graph, target func() string) []string {
	problems := c.outside(g, target)
	for _, p := range g.pkgs {
		if why, bad := c.forbidden(c.Forbidden, p.ImportPath); bad {
			via := g.chain(p.ImportPath)
			problems = append(problems, fmt.Sprintf("%s links %s (%s), which it must not: %s\n\timported through %s",
				via[0], p.ImportPath, target(), why, strings.Join(via, " -> ")))
		}
		if c.NoCgo && len(p.CgoFiles) > 0 {
			problems = append(problems, fmt.Sprintf("%s links %s (%s), which has cgo files: %s",
				g.chain(p.ImportPath)[0], p.ImportPath, target(), strings.Join(p.CgoFiles, ", ")))
		}
	}
	return problems
}

// outside checks Within: it walks the imports from the checked packages
// through the packages the layer may link, and reports each import that
// leaves the layer (with the chain to it), not every package linked
// beyond it.
func (c Checker) outside(g graph, target func() string) []string {
	mod := g.roots[0].Module
	if c.Within == nil || mod == nil {
		return nil
	}
	var problems []string
	prev := map[string]string{}
	var queue []string
	for _, r := range g.roots {
		prev[r.ImportPath] = ""
		queue = append(queue, r.ImportPath)
		if !allowed(c.Within, r.ImportPath) {
			problems = append(problems, fmt.Sprintf("%s is outside its layer (%s): it may be only %s of this module",
				r.ImportPath, target(), strings.Join(c.Within, ", ")))
		}
	}
	for len(queue) > 0 {
		cur := g.byPath[queue[0]]
		queue = queue[1:]
		if cur == nil {
			continue
		}
		for _, imp := range cur.Imports {
			if inModule(mod.Path, imp) && !allowed(c.Within, imp) {
				var via []string
				for p := cur.ImportPath; p != ""; p = prev[p] {
					via = append(via, p)
				}
				slices.Reverse(via)
				problems = append(problems, fmt.Sprintf("%s links %s (%s), which is outside its layer (it may link %s of this module)\n\timported through %s -> %s",
					via[0], imp, target(), strings.Join(c.Within, ", "), strings.Join(via, " -> "), imp))
				continue // what lies beyond is reported by the way in
			}
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur.ImportPath
				queue = append(queue, imp)
			}
		}
	}
	return problems
}

// own checks a checked package itself: NoMain, and its own imports
// (ForbiddenImports and AllowedImports).
func (c Checker) own(root *listed, target func() string) []string {
	var problems []string
	if c.NoMain && root.Name == "main" {
		problems = append(problems, fmt.Sprintf("%s is a program (package main), and its folder holds libraries only", root.ImportPath))
	}
	for _, imp := range root.Imports {
		if why, bad := c.forbidden(c.ForbiddenImports, imp); bad {
			problems = append(problems, fmt.Sprintf("%s imports %s (%s), which it must not: %s", root.ImportPath, imp, target(), why))
		}
		if c.AllowedImports != nil && !allowed(c.AllowedImports, imp) {
			problems = append(problems, fmt.Sprintf("%s imports %s (%s), which is not among its allowed imports", root.ImportPath, imp, target()))
		}
	}
	return problems
}

// inModule reports whether path is a package of module mod.
func inModule(mod, path string) bool {
	return path == mod || strings.HasPrefix(path, mod+"/")
}

// missing reports forbidden paths of the checked package's own module that
// name no folder: after a rename, a check of the old name would pass for
// ever. Paths of other modules are not checked: their source may not be on
// the machine.
func (c Checker) missing(root *listed) []string {
	if root.Module == nil || root.Module.Dir == "" {
		return nil
	}
	var problems []string
	named := map[string]string{}
	for _, m := range []map[string]string{c.Forbidden, c.ForbiddenImports} {
		for p := range m {
			named[p] = "forbidden"
		}
	}
	for _, p := range c.Within {
		named[p] = "allowed"
	}
	for p, kind := range named {
		rel, ok := strings.CutPrefix(strings.TrimSuffix(p, "/..."), root.Module.Path+"/")
		if !ok {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root.Module.Dir, filepath.FromSlash(rel))); err != nil || !fi.IsDir() {
			problems = append(problems, fmt.Sprintf("%s package %s does not exist in %s: update the dependency test", kind, p, root.Module.Dir))
		}
	}
	slices.Sort(problems)
	return problems
}

// pkg is the package argument of go list.
func (c Checker) pkg() string {
	if c.Package == "" {
		return "."
	}
	return c.Package
}

// target describes the target for messages: "linux/arm64, CGO_ENABLED=0".
func (c Checker) target() string {
	goos, goarch := c.GOOS, c.GOARCH
	if goos == "" {
		goos = goEnv("GOOS")
	}
	if goarch == "" {
		goarch = goEnv("GOARCH")
	}
	s := goos + "/" + goarch
	if c.CGO != "" {
		s += ", CGO_ENABLED=" + c.CGO
	}
	if c.Tags != nil {
		s += ", tags " + strings.Join(c.Tags, ",")
	}
	return s
}

// goEnv returns a go env variable, or "?" if go env fails (then go list
// has failed already and nothing is reported).
func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// list runs go list -json for the target with args and decodes its output.
func (c Checker) list(args ...string) ([]listed, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("deptest: the go command is needed to list dependencies: %w", err)
	}
	argv := []string{"list", "-json=" + listFields}
	if c.Tags != nil {
		argv = append(argv, "-tags="+strings.Join(c.Tags, ","))
	}
	cmd := exec.Command(goTool, append(argv, args...)...)
	cmd.Env = os.Environ()
	for _, kv := range [][2]string{{"GOOS", c.GOOS}, {"GOARCH", c.GOARCH}, {"CGO_ENABLED", c.CGO}} {
		if kv[1] != "" {
			cmd.Env = append(cmd.Env, kv[0]+"="+kv[1])
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("deptest: go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("deptest: decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// match reports whether path is forbidden by m, and why.
func match(m map[string]string, path string) (string, bool) {
	if why, ok := m[path]; ok {
		return why, true
	}
	for p, why := range m {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok && (path == prefix || strings.HasPrefix(path, prefix+"/")) {
			return why, true
		}
	}
	return "", false
}

// allowed reports whether path is in list, or below one of its "/..." entries.
func allowed(list []string, path string) bool {
	for _, p := range list {
		if p == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "/..."); ok && (path == prefix || strings.HasPrefix(path, prefix+"/")) {
			return true
		}
	}
	return false
}

// chain returns a shortest import chain from a checked package to the
// package to (breadth first from all of them at once, so the chain shown
// is the most direct one).
func (g graph) chain(to string) []string {
	prev := map[string]string{}
	var queue []string
	for _, r := range g.roots {
		prev[r.ImportPath] = ""
		queue = append(queue, r.ImportPath)
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		p := g.byPath[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{g.roots[0].ImportPath, "?", to}
}

// forbidden reports whether path is forbidden by m and not excepted, and
// why.
func (c Checker) forbidden(m map[string]string, path string) (string, bool) {
	why, bad := match(m, path)
	return why, bad && !allowed(c.Except, path)
}

// Packages lists the packages that match the patterns (go list's: "./...",
// "github.com/x/y/..."), for a rule that every package of a tree must
// keep: a package added later is checked without editing the test.
func Packages(patterns ...string) ([]string, error) {
	pkgs, err := Checker{}.list(patterns...)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p.ImportPath
	}
	return out, nil
}
