package applecontainer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/carapace-dev/carapace/core/runtime"
)

// defaultBin is the CLI's name, looked up on PATH.
const defaultBin = "container"

// install is a place an installer puts the CLI.
type install struct {
	path string
	by   string // who puts it there
}

// installs are where the CLI's installers put it. A login item or a
// LaunchAgent gets a minimal PATH, without /usr/local/bin or
// /opt/homebrew/bin, so the default Bin is looked up here, in this order,
// when PATH does not have it. Apple's own package comes first: it is the
// one Apple's documentation installs.
var installs = []install{
	{"/usr/local/bin/container", "Apple's installer package"}, // the .pkg from the releases page (and Homebrew's cask, which runs it)
	{"/opt/homebrew/bin/container", "Homebrew"},               // `brew install container`, Apple silicon's prefix
	{"/opt/local/bin/container", "MacPorts"},                  // `port install container`, MacPorts' default prefix
}

// stopSeconds is how long `container stop` waits after SIGTERM before it
// kills the agent.
const stopSeconds = 5

// Options configure an Engine.
type Options struct {
	// Bin is the container CLI: a path, or a name looked up on PATH.
	// Empty means "container" on PATH or, when PATH does not have it,
	// where Apple's installer package, Homebrew or MacPorts put it:
	// /usr/local/bin, /opt/homebrew/bin, /opt/local/bin.
	Bin string
	// Logger receives warnings and debug records; nil discards them.
	Logger *slog.Logger
}

// Engine runs agent containers with Apple's container CLI. Its methods may
// be called concurrently.
type Engine struct {
	bin       string
	fallbacks []install // tried in order when bin is not on PATH
	log       *slog.Logger
	// stopGrace bounds how long Run waits for `container run` to exit once
	// its context is cancelled, issuing `container stop` every stopRetry,
	// before it kills the CLI and deletes the container.
	stopGrace, stopRetry time.Duration
	// waitDelay bounds how long a command's output is read after it exits
	// (exec.Cmd.WaitDelay): a VM helper that inherited the pipes must not
	// hang Run.
	waitDelay time.Duration
}

var _ runtime.Engine = (*Engine)(nil)

// New returns an Engine. It runs nothing: Check tells whether the CLI is
// installed, running and recent enough.
func New(opts Options) *Engine {
	e := &Engine{
		bin:       opts.Bin,
		log:       opts.Logger,
		stopGrace: 3 * stopSeconds * time.Second,
		stopRetry: 2 * time.Second,
		waitDelay: 2 * time.Second,
	}
	if e.bin == "" {
		e.bin = defaultBin
		e.fallbacks = installs
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

// Name returns "apple", the engine's name in config.toml.
func (e *Engine) Name() string { return "apple" }

// Check runs `container --version` (or, when that prints no version it
// recognises, `container system version --format json`) and refuses a CLI
// older than MinVersion; then `container system status --format json`,
// which must report the services running, with an API server of the same
// version as the CLI, and an appRoot whose kernels/ holds a default
// kernel. Every refusal wraps runtime.ErrUnavailable and says what to do. Info.Bin is the CLI Check ran, and Info.BinFrom how it was
// found.
func (e *Engine) Check(ctx context.Context) (runtime.Info, error) {
	bin, from, err := e.binary()
	if err != nil {
		return runtime.Info{}, err
	}
	v, err := e.cliVersion(ctx)
	if err != nil {
		return runtime.Info{}, err
	}
	if v.LessThan(minVersion) {
		return runtime.Info{}, tooOld("CLI", v, installHint+"; then restart its services: `container system stop`, `container system start`")
	}
	if v.LessThan(recommendedVersion) {
		e.log.Warn("Apple container works, but a newer version is recommended: 1.2.0 cannot override its read-only /proc paths, and the socket relay has had fixes since 1.1.0",
			"version", v.String(), "recommended", RecommendedVersion, "from", ReleasesURL)
	}
	if err := e.checkSystem(ctx, v); err != nil {
		return runtime.Info{}, err
	}
	e.log.Debug("Apple container ready", "bin", bin, "found", from, "version", v.String())
	return runtime.Info{Engine: e.Name(), Version: v.String(), Bin: bin, BinFrom: from}, nil
}

// cliVersion returns the CLI's version.
func (e *Engine) cliVersion(ctx context.Context) (*semver.Version, error) {
	out, err := e.output(ctx, "--version")
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	if err == nil {
		v, perr := parseVersion(string(out))
		if perr == nil {
			return v, nil
		}
		err = perr
	}
	// `container system version` exists from 0.10.0; it prints the CLI's
	// version even when the services are not running.
	jout, jerr := e.output(ctx, "system", "version", "--format", "json")
	if jerr == nil {
		v, perr := parseSystemVersion(jout)
		if perr == nil {
			return v, nil
		}
		jerr = perr
	}
	hint := fmt.Sprintf("Carapace needs %s or later, from %s", MinVersion, ReleasesURL)
	if errors.Is(err, errEmptyVersion) {
		hint = "this build does not say its version, as MacPorts' port did up to 1.2.0: upgrade it " +
			"(`sudo port selfupdate && sudo port upgrade container`; 1.2.1 and later print their version), or " + installHint
	}
	return nil, fmt.Errorf("cannot tell the version of the Apple container CLI (--version: %w; system version: %w); %s: %w",
		err, jerr, hint, runtime.ErrUnavailable)
}

// systemStatus is the output of `container system status --format json`
// (SystemStatus.swift). Status is "running", "not running" or
// "unregistered" (the services were never started, or were stopped).
//
// Up to 1.2.2 at least (the source read) the API server's version is
// apiServerVersion, and it holds the server's whole banner:
// "container-apiserver version 1.1.0 (build: release, commit: 5973b9c)"
// (HealthCheckHarness.swift sends ReleaseVersion.singleLine). By 1.4.1,
// perhaps from 1.3.0, the output is nested (apple/container PR #1769):
// {"status", "client": {…}, "server": {"version": "1.4.1", …}, "host",
// "resources", "paths"}, and server.version is what the running server
// sent: a bare version from a 1.4.1 server, still the banner from an
// older one.
type systemStatus struct {
	Status           string `json:"status"`
	APIServerVersion string `json:"apiServerVersion"`
	AppRoot          string `json:"appRoot"`
	Server           struct {
		Version string `json:"version"`
	} `json:"server"`
	Paths struct {
		AppRoot string `json:"appRoot"`
	} `json:"paths"`
}

// appRoot is where the services keep their data (the kernels among it):
// appRoot up to 1.2.2 at least, paths.appRoot from 1.4.1.
func (st *systemStatus) appRoot() string {
	return cmp.Or(st.AppRoot, st.Paths.AppRoot)
}

// serverVersion is the API server's version as the output gives it, and
// the field it came from.
func (st *systemStatus) serverVersion() (raw, field string) {
	if st.APIServerVersion != "" {
		return st.APIServerVersion, "apiServerVersion"
	}
	return st.Server.Version, "server.version"
}

// restartHint is what to do about an API server that is not the CLI's.
const restartHint = "restart the services so that the installed version runs: `container system stop`, then `container system start`"

// checkSystem checks that the container services are running, and that
// the API server that runs is the CLI's version: after an upgrade the old
// server keeps running until `container system stop`, and a server older
// than 1.1.0 relays the session's socket so that the non-root agent
// cannot connect.
func (e *Engine) checkSystem(ctx context.Context, cli *semver.Version) error {
	out, err := e.output(ctx, "system", "status", "--format", "json")
	if err != nil && ctx.Err() != nil {
		return err
	}
	var st systemStatus
	jsonErr := json.Unmarshal(bytes.TrimSpace(out), &st)
	var ce *cliError
	switch {
	case err != nil && !errors.As(err, &ce): // could not run it at all
		return fmt.Errorf("container system status: %w", err)
	case err != nil, jsonErr == nil && st.Status != "running",
		jsonErr != nil && bytes.Contains(out, []byte("not running")):
		status := st.Status
		if status == "" {
			status = firstLine(string(out))
		}
		if status == "" && ce != nil {
			status = ce.summary()
		}
		return fmt.Errorf("the Apple container services are not running (system status: %s): run `container system start`: %w",
			status, runtime.ErrUnavailable)
	case jsonErr != nil:
		return fmt.Errorf("container system status --format json printed no JSON (%w): %q: %w", jsonErr, firstLine(string(out)), runtime.ErrUnavailable)
	}
	raw, field := st.serverVersion()
	if raw == "" {
		return fmt.Errorf("container system status says the services run but gives no API server version (neither apiServerVersion nor server.version): %s; "+
			"Carapace cannot tell whether the server is as recent as the CLI (%s): %s: %w", firstLine(string(out)), cli, restartHint, runtime.ErrUnavailable)
	}
	sv, err := parseVersion(raw)
	if err != nil {
		return fmt.Errorf("cannot tell the version of the running API server from container system status's %s %q (%w), so Carapace will not use it: %s: %w",
			field, raw, err, restartHint, runtime.ErrUnavailable)
	}
	if sv.LessThan(minVersion) {
		return tooOld("API server", sv, "the services that run are older than the CLI ("+cli.String()+"): "+restartHint+"; or "+installHint)
	}
	if !sameVersion(sv, cli) {
		which := "the services of another installation still run"
		if sv.LessThan(cli) {
			which = "the services of the version before an upgrade still run (installing a new version does not restart them)"
		}
		return fmt.Errorf("the running container API server is %s but the CLI is %s: %s; %s: %w",
			sv, cli, which, restartHint, runtime.ErrUnavailable)
	}
	return e.checkKernel(st.appRoot())
}

// kernelFix installs the kernel Apple recommends (it downloads it).
const kernelFix = "container system kernel set --recommended"

// defaultKernelPrefix names the default kernel of an architecture in
// <appRoot>/kernels: default.kernel-arm64, a symbolic link to the kernel
// file (KernelService.swift, 1.1.0 to 1.2.2 and on).
const defaultKernelPrefix = "default.kernel-"

// checkKernel checks that the services have a kernel to boot containers
// with. A fresh installation starts its services and answers "running",
// but its kernels/ is empty until a kernel is set, and every `container
// run` fails until then. An appRoot the status did not give, or a folder
// Carapace may not read, is not checked (logged).
func (e *Engine) checkKernel(appRoot string) error {
	if appRoot == "" {
		e.log.Debug("container system status gives no appRoot: the kernel is not checked")
		return nil
	}
	dir := filepath.Join(appRoot, "kernels")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return noKernel(dir + " does not exist")
	}
	if err != nil {
		e.log.Warn("cannot read Apple container's kernels: the kernel is not checked", "dir", dir, "err", err)
		return nil
	}
	var found []string
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), defaultKernelPrefix) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, ent.Name()))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			found = append(found, ent.Name()+" points to a kernel that is not there")
		case err != nil:
			found = append(found, ent.Name()+": "+err.Error())
		case !fi.Mode().IsRegular():
			found = append(found, ent.Name()+" is not a file")
		case fi.Size() == 0:
			found = append(found, ent.Name()+" is empty")
		default:
			return nil
		}
	}
	if len(found) == 0 {
		return noKernel(dir + " holds no default kernel (" + defaultKernelPrefix + "<arch>)")
	}
	return noKernel(dir + ": " + strings.Join(found, "; "))
}

// noKernel is the error for services without a kernel: why, and the fix.
func noKernel(why string) error {
	return fmt.Errorf("the Apple container services have no kernel to run containers with (%s): they run, but every container fails to start "+
		"until a kernel is set; run `%s` (it downloads the kernel Apple recommends; offline, container system kernel set --tar FILE --binary PATH "+
		"installs one you have): %w", why, kernelFix, runtime.ErrUnavailable)
}

// Stop stops the container named name (`container stop`, SIGTERM then
// SIGKILL after 5 s) and deletes it (`container delete -f`). A container
// that is not there is not an error, for either command.
func (e *Engine) Stop(ctx context.Context, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("stop: container name %q: %w", name, runtime.ErrInvalidSpec)
	}
	_, stopErr := e.output(ctx, "stop", "-t", strconv.Itoa(stopSeconds), name)
	if stopErr != nil && !isNotFound(stopErr) {
		if ctx.Err() != nil {
			return stopErr
		}
		e.log.Warn("container stop failed; deleting by force", "container", name, "err", stopErr)
	}
	_, err := e.output(ctx, "delete", "-f", name)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	return nil
}

// List returns the names of the containers, running or not, whose label
// key has value, sorted.
func (e *Engine) List(ctx context.Context, key, value string) ([]string, error) {
	out, err := e.output(ctx, "list", "--all", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	cs, err := parseList(out)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cs {
		if v, ok := c.Labels[key]; ok && v == value {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// nameRE is a name Apple's container accepts as an id, and that the CLI
// cannot take for an option.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,62}$`)

// binary returns the CLI's path and how it was found: "PATH", the
// installer whose location it is when PATH does not have it, or
// "configured" for an Options.Bin with a directory.
func (e *Engine) binary() (path, from string, err error) {
	p, err := exec.LookPath(e.bin)
	if err == nil {
		from = "PATH"
		if strings.ContainsRune(e.bin, os.PathSeparator) {
			from = "configured"
		}
		return p, from, nil
	}
	for _, f := range e.fallbacks {
		if fi, ferr := os.Stat(f.path); ferr == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return f.path, f.by + ", not on PATH", nil
		}
	}
	where := ""
	if len(e.fallbacks) > 0 {
		paths := make([]string, len(e.fallbacks))
		for i, f := range e.fallbacks {
			paths[i] = f.path
		}
		where = ", nor at " + strings.Join(paths, ", ")
	}
	return "", "", fmt.Errorf("the Apple container CLI is not installed (%w%s): %s, then run `container system start`: %w",
		err, where, installHint, runtime.ErrUnavailable)
}

// cliError is a container command that exited with a non-zero status.
type cliError struct {
	args   []string
	code   int
	stderr string
}

func (c *cliError) Error() string {
	return fmt.Sprintf("container %s: exit status %d: %s", strings.Join(c.args, " "), c.code, c.summary())
}

// summary is the end of the command's stderr, where the CLI writes its
// "Error: ..." line.
func (c *cliError) summary() string {
	s := strings.TrimSpace(c.stderr)
	if len(s) > 500 {
		s = "…" + s[len(s)-500:]
	}
	if s == "" {
		return "no message"
	}
	return s
}

// notFoundRE matches the CLI's message for a container it does not know:
// `Error: internalError: "failed to stop container" (cause: "notFound:
// "container with ID x not found"")` (ContainersService.swift).
var notFoundRE = regexp.MustCompile(`\bnotFound\b|(?i)\bnot found\b`)

// isNotFound reports whether err is the CLI's "no such container".
func isNotFound(err error) bool {
	var ce *cliError
	return errors.As(err, &ce) && notFoundRE.MatchString(ce.stderr)
}

// servicesDown reports whether the CLI failed because its services are not
// running: it then prints "XPC connection error" and, from 0.2.0, "Ensure
// container system service has been started with `container system
// start`." (Application.swift).
func servicesDown(ce *cliError) bool {
	return strings.Contains(ce.stderr, "XPC connection error") || strings.Contains(ce.stderr, "container system start")
}

// output runs the CLI with args and returns its stdout, also when it exits
// with a non-zero status (a *cliError, wrapping runtime.ErrUnavailable when
// the services are not running).
func (e *Engine) output(ctx context.Context, args ...string) ([]byte, error) {
	bin, _, err := e.binary()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = e.waitDelay
	e.log.Debug("exec", "bin", bin, "args", args)
	err = cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("container %s: %w", strings.Join(args, " "), context.Cause(ctx))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return stdout.Bytes(), fmt.Errorf("container %s: %w", strings.Join(args, " "), err)
	}
	ce := &cliError{args: args, code: ee.ExitCode(), stderr: stderr.String()}
	if servicesDown(ce) {
		return stdout.Bytes(), fmt.Errorf("%w (run `container system start`): %w", ce, runtime.ErrUnavailable)
	}
	return stdout.Bytes(), ce
}
