package applecontainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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

// installedBin is where Apple's installer puts the CLI. A login item or a
// LaunchAgent gets a PATH without /usr/local/bin, so the default Bin falls
// back to it.
const installedBin = "/usr/local/bin/container"

// stopSeconds is how long `container stop` waits after SIGTERM before it
// kills the agent.
const stopSeconds = 5

// Options configure an Engine.
type Options struct {
	// Bin is the container CLI: a path, or a name looked up on PATH.
	// Empty means "container", on PATH or else at /usr/local/bin/container
	// where Apple's installer puts it.
	Bin string
	// Logger receives warnings and debug records; nil discards them.
	Logger *slog.Logger
}

// Engine runs agent containers with Apple's container CLI. Its methods may
// be called concurrently.
type Engine struct {
	bin       string
	fallbacks []string // tried in order when bin is not on PATH
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
		e.fallbacks = []string{installedBin}
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
// which must report the services running, with an API server no older than
// MinVersion either. Every refusal wraps runtime.ErrUnavailable and says
// what to do.
func (e *Engine) Check(ctx context.Context) (runtime.Info, error) {
	bin, err := e.binary()
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
	if err := e.checkSystem(ctx); err != nil {
		return runtime.Info{}, err
	}
	e.log.Debug("Apple container ready", "bin", bin, "version", v.String())
	return runtime.Info{Engine: e.Name(), Version: v.String()}, nil
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
	return nil, fmt.Errorf("cannot tell the version of the Apple container CLI (--version: %w; system version: %w); "+
		"Carapace needs %s or later, from %s: %w", err, jerr, MinVersion, ReleasesURL, runtime.ErrUnavailable)
}

// systemStatus is the output of `container system status --format json`
// (SystemStatus.swift): status is "running", "not running" or
// "unregistered" (the services were never started, or were stopped).
type systemStatus struct {
	Status           string `json:"status"`
	APIServerVersion string `json:"apiServerVersion"`
}

// checkSystem checks that the container services are running, and that
// the API server that runs is recent enough.
func (e *Engine) checkSystem(ctx context.Context) error {
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
	}
	if st.APIServerVersion == "" {
		return nil
	}
	sv, err := semver.NewVersion(st.APIServerVersion)
	if err != nil {
		e.log.Warn("cannot parse the API server's version", "version", st.APIServerVersion, "err", err)
		return nil
	}
	if sv.LessThan(minVersion) {
		return tooOld("API server", sv, "the services that run are older than the CLI: restart them with "+
			"`container system stop` and `container system start`, or "+installHint)
	}
	return nil
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

// binary returns the CLI's path.
func (e *Engine) binary() (string, error) {
	p, err := exec.LookPath(e.bin)
	if err == nil {
		return p, nil
	}
	for _, f := range e.fallbacks {
		if fi, ferr := os.Stat(f); ferr == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return f, nil
		}
	}
	return "", fmt.Errorf("the Apple container CLI is not installed (%w): %s, then run `container system start`: %w",
		err, installHint, runtime.ErrUnavailable)
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
	bin, err := e.binary()
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
