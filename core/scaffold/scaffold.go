// Package scaffold writes a new plugin folder: a manifest with one tool, a
// Go handler that calls plugin.Serve, its tests on the plugin test harness,
// a skill file, a Makefile, go.mod, .gitignore and a README. The result
// builds, tests and validates unchanged, so an author starts from a
// working plugin and changes one thing at a time.
//
// The templates are embedded from template/*.tmpl (the suffix keeps the Go
// tooling away from the Go ones).
package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/version"
)

// SDKModule is the module path of the Carapace SDK a plugin requires.
const SDKModule = "github.com/carapace-dev/carapace"

// SDKVersion is the version of the SDK a new plugin's go.mod requires: a
// placeholder that only a replace directive (Options.SDKDir) resolves until
// the SDK is published.
const SDKVersion = "v0.0.0-00010101000000-000000000000"

// GoVersion is the go line of a new plugin's go.mod.
const GoVersion = "1.26"

// tidyTimeout bounds `go mod tidy`.
const tidyTimeout = 5 * time.Minute

// Errors of Create; the errors returned wrap them.
var (
	// ErrInvalid: an option is not valid (the message says which and why).
	ErrInvalid = errors.New("invalid plugin options")
	// ErrNotEmpty: the target folder exists and is not empty.
	ErrNotEmpty = errors.New("folder exists and is not empty")
)

// Options describe the plugin to create.
type Options struct {
	// Name is the plugin's name, kebab-case (manifest.CheckPluginName).
	Name string
	// Tool is the example tool's name, snake_case; "" means
	// "<name in snake_case>_example".
	Tool string
	// Risk is the tool's risk level, "low" (the default when "") or "high".
	Risk string
	// SDKDir is a local Carapace source tree for a replace directive in
	// go.mod; "" writes none (go.mod then needs one, or a published SDK).
	SDKDir string
	// Module is the plugin's module path; "" means
	// "example.com/carapace-plugin-<name>".
	Module string
}

// file is one file Create writes.
type file struct {
	path     string // slash-separated, relative to the plugin folder
	template string // its template under template/
}

// files lists the files Create writes for a plugin named name, in order.
func files(name string) []file {
	return []file{
		{"manifest.json", "manifest.json.tmpl"},
		{"main.go", "main.go.tmpl"},
		{"handler.go", "handler.go.tmpl"},
		{"handler_test.go", "handler_test.go.tmpl"},
		{"skills/" + name + ".md", "skill.md.tmpl"},
		{"Makefile", "Makefile.tmpl"},
		{"go.mod", "go.mod.tmpl"},
		{".gitignore", "gitignore.tmpl"},
		{"README.md", "README.md.tmpl"},
	}
}

// Files lists the files Create writes for a plugin named name, as
// slash-separated paths relative to the plugin folder; `go mod tidy` adds
// go.sum.
func Files(name string) []string {
	var out []string
	for _, f := range files(name) {
		out = append(out, f.path)
	}
	return out
}

//go:embed template/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(templateFS, "template/*.tmpl"))

// data is what the templates see.
type data struct {
	Name, Tool, Risk, Func, Module string
	High                           bool
	AppCompat                      string
	GoVersion                      string
	SDKModule, SDKVersion          string
	SDKDir                         string // quoted for go.mod when need be; "" for none
}

// Create writes a new plugin into dir, which must not exist or be empty.
// If go is on PATH and opts.SDKDir is set, it then runs `go mod tidy` in
// dir so that go.sum is complete (offline, from the module cache, when the
// SDK's dependencies are there); a failure leaves the files in place and
// returns an error that says how to finish. Without SDKDir there is
// nothing tidy could resolve, so it is not run.
func Create(dir string, opts Options) error {
	d, err := prepare(opts)
	if err != nil {
		return err
	}
	list := files(d.Name)
	out := make([][]byte, len(list))
	for i, f := range list {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, f.template, d); err != nil {
			return fmt.Errorf("render %s: %w", f.path, err)
		}
		out[i] = b.Bytes()
	}
	if err := makeEmptyDir(dir); err != nil {
		return err
	}
	for i, f := range list {
		path := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create plugin %s: %w", d.Name, err)
		}
		if err := writeNew(path, out[i], 0o644); err != nil {
			return fmt.Errorf("create plugin %s: %w", d.Name, err)
		}
	}
	if d.SDKDir == "" {
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil // the caller says what to do without a toolchain
	}
	return tidy(goBin, dir)
}

// prepare checks opts and fills in the defaults.
func prepare(opts Options) (*data, error) {
	if err := manifest.CheckPluginName(opts.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	d := &data{
		Name: opts.Name, Tool: opts.Tool, Risk: opts.Risk, Module: opts.Module,
		AppCompat: version.Base, GoVersion: GoVersion, SDKModule: SDKModule, SDKVersion: SDKVersion,
	}
	if d.Tool == "" {
		d.Tool = strings.ReplaceAll(opts.Name, "-", "_") + "_example"
	}
	if err := manifest.CheckToolName(d.Tool); err != nil {
		if opts.Tool == "" {
			return nil, fmt.Errorf("%w: the default tool name: %w; name the tool yourself (--tool)", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if slices.Contains(manifest.ReservedTools, d.Tool) {
		return nil, fmt.Errorf("%w: tool name %q is reserved for the core; choose another", ErrInvalid, d.Tool)
	}
	switch d.Risk {
	case "":
		d.Risk = manifest.RiskLow
	case manifest.RiskLow, manifest.RiskHigh:
	default:
		return nil, fmt.Errorf("%w: risk %q: want %q or %q", ErrInvalid, d.Risk, manifest.RiskLow, manifest.RiskHigh)
	}
	d.High = d.Risk == manifest.RiskHigh
	d.Func = goName(d.Tool)
	if d.Module == "" {
		d.Module = "example.com/carapace-plugin-" + opts.Name
	}
	if err := checkModule(d.Module); err != nil {
		return nil, err
	}
	if opts.SDKDir != "" {
		abs, err := CheckSDK(opts.SDKDir)
		if err != nil {
			return nil, err
		}
		d.SDKDir = modQuote(abs)
	}
	return d, nil
}

// goName turns a snake_case tool name into a Go method name in lower camel
// case: "weather_forecast" becomes "weatherForecast".
func goName(tool string) string {
	parts := strings.Split(tool, "_")
	var b strings.Builder
	for i, p := range parts {
		if p == "" {
			continue
		}
		if i > 0 && b.Len() > 0 {
			r := []rune(p)
			r[0] = unicode.ToUpper(r[0])
			p = string(r)
		}
		b.WriteString(p)
	}
	return b.String()
}

var moduleRE = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9._~]*(/[-A-Za-z0-9._~]+)*$`)

// checkModule accepts a plausible module path.
func checkModule(m string) error {
	if !moduleRE.MatchString(m) || slices.Contains(strings.Split(m, "/"), "..") {
		return fmt.Errorf("%w: module path %q: want something like example.com/carapace-plugin-name", ErrInvalid, m)
	}
	return nil
}

// CheckSDK checks that dir is a Carapace source tree (its go.mod declares
// module SDKModule and it has core/plugin) and returns it made absolute.
func CheckSDK(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: SDK folder %s: %w", ErrInvalid, dir, err)
	}
	b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil || modulePath(b) != SDKModule {
		return "", fmt.Errorf("%w: %s is not a Carapace source tree (want a go.mod declaring module %s)", ErrInvalid, abs, SDKModule)
	}
	if fi, err := os.Stat(filepath.Join(abs, "core", "plugin")); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no core/plugin: not a Carapace source tree", ErrInvalid, abs)
	}
	return abs, nil
}

// modulePath returns the module directive of a go.mod file.
func modulePath(gomod []byte) string {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			if s, err := strconv.Unquote(f[1]); err == nil {
				return s
			}
			return f[1]
		}
	}
	return ""
}

// modQuote quotes a path for go.mod when it holds anything but the
// characters a bare go.mod token may.
func modQuote(p string) string {
	for _, r := range p {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/._-+~@:", r)) {
			return strconv.Quote(p)
		}
	}
	return p
}

// makeEmptyDir creates dir, or accepts an existing empty folder.
func makeEmptyDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("create %s: %w (it is a file)", dir, ErrNotEmpty)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: %w; choose another name or folder", dir, ErrNotEmpty)
	}
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TidyError is returned when `go mod tidy` fails after the files were
// written; they are left in place.
type TidyError struct {
	Dir    string
	Output string // what go printed
	Err    error
}

// Error says what failed and how to finish by hand.
func (e *TidyError) Error() string {
	out := strings.TrimSpace(e.Output)
	if out != "" {
		out = ":\n" + out
	}
	return fmt.Sprintf("the plugin is written, but `go mod tidy` in %s failed (%v); fix go.mod and run it again%s", e.Dir, e.Err, out)
}

// Unwrap returns the cause.
func (e *TidyError) Unwrap() error { return e.Err }

// tidy runs `go mod tidy` in dir.
func tidy(goBin, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), tidyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "mod", "tidy")
	cmd.Dir = dir
	// A go.work above dir must not decide what the new module builds with.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &TidyError{Dir: dir, Output: string(out), Err: err}
	}
	return nil
}
