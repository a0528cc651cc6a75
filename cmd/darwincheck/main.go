// Command darwincheck type-checks this module's packages as they build for
// darwin/arm64 with cgo on, on any machine and without a C toolchain, so
// that Linux development and CI catch a broken macOS file (the Keychain
// store, the menu-bar app) before a Mac does.
//
//	go run ./cmd/darwincheck [-os darwin] [-arch arm64] [-test=true] [-v] [packages]
//
// `GOOS=darwin go vet` cannot do this: with cgo on it needs a C compiler
// for darwin, and with cgo off it silently skips every file built only
// with cgo. darwincheck instead asks `go list -deps` (which selects files
// by build constraints but does not run cgo) which files make up each
// package for the target, then type-checks every package from source
// with go/types, in dependency order and in parallel, importing each
// package from the ones already checked. Packages with cgo files are
// checked with go/types' fake cgo (FakeImportC): the pseudo-package "C"
// has no declarations and uses of it are not reported.
//
// Errors in the main module's packages (and, with -test, in their tests)
// are printed as file:line:col: message and make the exit status 1.
// Dependencies (the standard library, other modules) are checked without
// their function bodies, only for the types they export; errors in them,
// usually fake cgo's follow-on errors, are counted and printed with -v.
// The summary counts the main module's package directories and the files
// in them that need cgo (that import "C" or whose build constraint names
// the cgo tag): the files a cgo-less `GOOS=darwin go vet` would miss.
//
// The check is of types only: no cgo is run, nothing is compiled or
// linked, and C declarations are not checked at all.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/internal/textutil"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it parses args, checks, prints, and returns the exit
// status (0 clean, 1 type errors, 2 usage or go list failures).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("darwincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := Options{}
	fs.StringVar(&opts.GOOS, "os", "darwin", "target GOOS")
	fs.StringVar(&opts.GOARCH, "arch", "arm64", "target GOARCH")
	fs.BoolVar(&opts.Tests, "test", true, "also check the packages' _test.go files")
	verbose := fs.Bool("v", false, "print errors in dependencies and timings")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./cmd/darwincheck [-os darwin] [-arch arm64] [-test=true] [-v] [packages]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts.Patterns = fs.Args()
	start := time.Now()
	res, err := Check(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "darwincheck: %v\n", err)
		return 2
	}
	for _, e := range res.Errors {
		fmt.Fprintln(stderr, e)
	}
	if *verbose {
		for _, e := range res.DepErrors {
			fmt.Fprintf(stderr, "dependency: %s\n", e)
		}
		fmt.Fprintf(stderr, "darwincheck: %d packages in all (%d with cgo files), %d errors in dependencies; go list %v, type-check %v, total %v\n",
			res.AllPackages, res.AllCgoPackages, len(res.DepErrors), res.ListTime.Round(time.Millisecond),
			res.CheckTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "darwincheck: %d packages of %s type-checked for %s/%s (%d files with cgo)\n",
		res.Packages, res.Module, opts.GOOS, opts.GOARCH, res.CgoFiles)
	if len(res.Errors) > 0 {
		fmt.Fprintf(stderr, "darwincheck: %d type errors\n", len(res.Errors))
		return 1
	}
	return 0
}

// Options say what to check.
type Options struct {
	Dir      string   // where to run go list (the module); "" is the current directory
	GOOS     string   // target; "" is darwin
	GOARCH   string   // target; "" is arm64
	Patterns []string // package patterns; none is ./...
	Tests    bool     // also check _test.go files
}

// Result is what a check found.
type Result struct {
	Module    string   // the main module's path
	Packages  int      // package directories of the main module checked
	CgoFiles  int      // files among them that need cgo
	Errors    []string // in the main module: "file:line:col: message"
	DepErrors []string // in dependencies

	AllPackages    int // every package checked, dependencies and test variants included
	AllCgoPackages int // how many of them have cgo files
	ListTime       time.Duration
	CheckTime      time.Duration
}

// listed is the part of `go list -json` output darwincheck uses.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	ForTest    string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	ImportMap  map[string]string
	Module     *struct {
		Path      string
		Main      bool
		GoVersion string
	}
	Error *struct{ Err string }
}

// listFields are the fields asked of go list.
const listFields = "ImportPath,Name,Dir,ForTest,GoFiles,CgoFiles,Imports,ImportMap,Module,Error"

// Check lists the packages for the target and type-checks them.
func Check(ctx context.Context, opts Options) (*Result, error) {
	if opts.GOOS == "" {
		opts.GOOS = "darwin"
	}
	if opts.GOARCH == "" {
		opts.GOARCH = "arm64"
	}
	if len(opts.Patterns) == 0 {
		opts.Patterns = []string{"./..."}
	}
	sizes := types.SizesFor("gc", opts.GOARCH)
	if sizes == nil {
		return nil, fmt.Errorf("unknown GOARCH %q", opts.GOARCH)
	}
	res := &Result{}
	start := time.Now()
	pkgs, err := list(ctx, opts)
	if err != nil {
		return nil, err
	}
	res.ListTime = time.Since(start)
	start = time.Now()

	c := &checker{fset: token.NewFileSet(), sizes: sizes, done: map[string]*result{}}
	var todo []*listed
	var mainErrs, depErrs []diag
	dirs, cgoFiles := map[string]bool{}, map[string]bool{}
	for _, p := range pkgs {
		if p.Module != nil && p.Module.Main && res.Module == "" {
			res.Module = p.Module.Path
		}
		// The generated main of a test binary lives in the build cache.
		if p.Name == "main" && p.ForTest == "" && strings.HasSuffix(p.ImportPath, ".test") && opts.Tests {
			continue
		}
		c.done[p.ImportPath] = &result{ready: make(chan struct{})}
		todo = append(todo, p)
	}
	if res.Module == "" {
		return nil, errors.New("no package of the main module matched")
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, p := range todo {
		wg.Go(func() {
			c.check(p, sem)
		})
	}
	wg.Wait()
	res.CheckTime = time.Since(start)

	for _, p := range todo {
		r := c.done[p.ImportPath]
		res.AllPackages++
		if len(p.CgoFiles) > 0 {
			res.AllCgoPackages++
		}
		if !isMain(p) {
			depErrs = append(depErrs, r.errors...)
			continue
		}
		mainErrs = append(mainErrs, r.errors...)
		if !dirs[p.Dir] {
			dirs[p.Dir] = true
			res.Packages++
		}
		for _, f := range r.cgoFiles {
			cgoFiles[f] = true
		}
	}
	res.CgoFiles = len(cgoFiles)
	res.Errors = format(opts.Dir, mainErrs)
	res.DepErrors = format(opts.Dir, depErrs)
	return res, nil
}

// isMain reports whether p belongs to the main module.
func isMain(p *listed) bool { return p.Module != nil && p.Module.Main }

// list runs go list for the target. It resolves files by build
// constraints with cgo enabled, and runs neither cgo nor the compiler.
func list(ctx context.Context, opts Options) ([]*listed, error) {
	args := []string{"list", "-e", "-deps", "-json=" + listFields}
	if opts.Tests {
		args = append(args, "-test")
	}
	args = append(args, "--")
	args = append(args, opts.Patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), "GOOS="+opts.GOOS, "GOARCH="+opts.GOARCH, "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for %s/%s: %w\n%s", opts.GOOS, opts.GOARCH, err, stderr.Bytes())
	}
	var pkgs []*listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// checker type-checks packages concurrently; each waits for its imports.
type checker struct {
	fset  *token.FileSet
	sizes types.Sizes
	done  map[string]*result // by import path; written before the checks start
}

// result is one package's outcome; ready is closed when it is final.
type result struct {
	ready    chan struct{}
	pkg      *types.Package
	errors   []diag
	cgoFiles []string // files of the main module that need cgo
}

// check type-checks p once its imports are done, holding a slot of sem
// while it works.
func (c *checker) check(p *listed, sem chan struct{}) {
	r := c.done[p.ImportPath]
	defer close(r.ready)
	for _, imp := range p.Imports {
		if d, ok := c.done[imp]; ok {
			<-d.ready
		}
	}
	sem <- struct{}{}
	defer func() { <-sem }()

	main := isMain(p)
	if p.Error != nil {
		r.errors = append(r.errors, diag{msg: p.ImportPath + ": " + textutil.OneLine(p.Error.Err)})
	}
	mode := parser.SkipObjectResolution
	if main {
		mode |= parser.ParseComments
	}
	var files []*ast.File
	cgo := map[string]bool{}
	for _, name := range p.CgoFiles {
		cgo[name] = true
	}
	for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.Dir, name)
		}
		f, err := parser.ParseFile(c.fset, path, nil, mode)
		if err != nil {
			var list scanner.ErrorList
			if errors.As(err, &list) {
				for _, e := range list {
					r.errors = append(r.errors, diag{pos: e.Pos, msg: e.Msg})
				}
			} else {
				r.errors = append(r.errors, diag{msg: err.Error()})
			}
		}
		if f == nil {
			continue
		}
		files = append(files, f)
		if main && (cgo[name] || needsCgoTag(f)) {
			r.cgoFiles = append(r.cgoFiles, path)
		}
	}
	conf := types.Config{
		Importer:         importer{c: c, p: p},
		FakeImportC:      len(p.CgoFiles) > 0,
		IgnoreFuncBodies: !main,
		Sizes:            c.sizes,
		Error: func(err error) {
			if te, ok := err.(types.Error); ok {
				r.errors = append(r.errors, diag{pos: te.Fset.Position(te.Pos), msg: te.Msg})
			} else {
				r.errors = append(r.errors, diag{msg: err.Error()})
			}
		},
	}
	if p.Module != nil && p.Module.GoVersion != "" {
		conf.GoVersion = "go" + p.Module.GoVersion
	}
	path := p.ImportPath
	if i := strings.Index(path, " ["); i >= 0 {
		path = path[:i] // a test variant: "p [p.test]"
	}
	r.pkg, _ = conf.Check(path, c.fset, files, nil)
}

// importer resolves p's imports to the packages already checked.
type importer struct {
	c *checker
	p *listed
}

// Import implements types.Importer.
func (im importer) Import(path string) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	if mapped, ok := im.p.ImportMap[path]; ok {
		path = mapped
	}
	d, ok := im.c.done[path]
	if !ok {
		return nil, fmt.Errorf("package %s not listed by go list", path)
	}
	<-d.ready
	if d.pkg == nil {
		return nil, fmt.Errorf("package %s could not be checked", path)
	}
	return d.pkg, nil
}

// needsCgoTag reports whether f's //go:build constraint names the cgo tag.
func needsCgoTag(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, cm := range g.List {
			if !constraint.IsGoBuild(cm.Text) {
				continue
			}
			expr, err := constraint.Parse(cm.Text)
			if err != nil {
				continue
			}
			found := false
			expr.Eval(func(tag string) bool {
				found = found || tag == "cgo"
				return true
			})
			return found
		}
	}
	return false
}

// diag is one error: where (if known) and what.
type diag struct {
	pos token.Position
	msg string
}

// format sorts errors by position, drops repeats (a package and its test
// variant report the same error in a shared file) and formats them as
// file:line:col: message, file names relative to dir where they are
// under it.
func format(dir string, errs []diag) []string {
	base, err := filepath.Abs(dir)
	if err != nil {
		base = ""
	}
	slices.SortFunc(errs, func(a, b diag) int {
		return cmp.Or(cmp.Compare(a.pos.Filename, b.pos.Filename), cmp.Compare(a.pos.Line, b.pos.Line),
			cmp.Compare(a.pos.Column, b.pos.Column), cmp.Compare(a.msg, b.msg))
	})
	errs = slices.Compact(errs)
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		if !e.pos.IsValid() {
			out = append(out, e.msg)
			continue
		}
		if rel, ok := strings.CutPrefix(e.pos.Filename, base+string(filepath.Separator)); ok && base != "" {
			e.pos.Filename = rel
		}
		out = append(out, e.pos.String()+": "+e.msg)
	}
	return out
}
