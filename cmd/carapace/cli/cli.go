// Package cli is the carapace command line: the commands, their flags and
// help, and their output. It talks to a running core only through the
// control API (core/control) and reads the audit log directly, so it never
// links the core itself; `carapace serve` runs the core through the Serve
// function its caller passes in.
//
// Exit codes: 0 success, 1 a runtime error, 2 a usage error (a bad flag,
// argument or value, including a missing --runtime for `carapace run`), and
// for `carapace run` the agent command's own status (128+N if a signal N
// killed it). Errors print one line, "carapace: <message>", on stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/service"
)

// requestTimeout bounds one control API request made by a command.
const requestTimeout = 10 * time.Second

// Config is what the command line needs from its main.
type Config struct {
	// Version is this binary's version ("dev" for a development build).
	Version string
	// Serve runs the core in the foreground until ctx is done; nil makes
	// `carapace serve` fail.
	Serve func(ctx context.Context, home home.Dir, logger *slog.Logger) error
	// Stdout and Stderr receive the commands' output and errors; nil means
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Stdin is the agent command's stdin for `carapace run`; nil means
	// os.Stdin.
	Stdin io.Reader
	// ServiceRunner runs systemctl or launchctl for `carapace service`;
	// nil runs them (service.Exec).
	ServiceRunner service.Runner
	// NewEngine returns the container engine config.toml names ("docker",
	// "podman", "apple") for doctor and setup: main passes the real ones
	// (cmd/wiring.Engines), so that the command line, a client of the
	// core, links no composition of it. Nil: no engine is ready, and
	// doctor and setup say the build has none.
	NewEngine func(name string) (runtime.Engine, error)
}

// app is the state the commands share.
type app struct {
	cfg      Config
	homeFlag string
}

// New returns the root command. Run it with Execute.
func New(cfg Config) *cobra.Command {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	a := &app{cfg: cfg}
	root := &cobra.Command{
		Use:   "carapace",
		Short: "Run and manage Carapace, a security-first host for a personal AI agent",
		Long: `Carapace runs a personal AI agent in an isolated container whose only way
out is the ipc binary, speaking to the Carapace core over a per-session
socket. The core checks every request, asks you before high-risk tools run,
and writes an audit log.

The carapace command starts the core (carapace serve) and talks to a running
one over its control socket, $CARAPACE_HOME/run/control.sock.

The home directory is --home if given, else $CARAPACE_HOME, else ~/.carapace.

Exit status: 0 on success, 1 on an error, 2 on a usage error; carapace run
exits with the agent command's status.`,
		Example: `  carapace setup
  carapace serve
  carapace status
  carapace confirm list
  carapace watch
  carapace audit --last 20 --outcome error`,
		Version:       cfg.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(cfg.Stdout)
	root.SetErr(cfg.Stderr)
	root.SetIn(cfg.Stdin)
	root.SetVersionTemplate("carapace {{.Version}}\n")
	root.PersistentFlags().StringVar(&a.homeFlag, "home", "", "the Carapace home directory (default $CARAPACE_HOME, else ~/.carapace)")
	root.AddCommand(
		a.serveCmd(), a.statusCmd(), a.stopCmd(), a.pauseCmd(true), a.pauseCmd(false), a.versionCmd(), a.sessionsCmd(),
		a.runCmd(), a.confirmCmd(), a.watchCmd(), a.auditCmd(), a.pluginCmd(), a.authCmd(), a.telegramCmd(), a.tasksCmd(), a.serviceCmd(), a.configCmd(), a.doctorCmd(), a.setupCmd(),
	)
	markRuntime(root)
	a.completeFlags(root)
	return root
}

// Execute runs root and returns the process exit code, having printed any
// error as one line on root's stderr.
func Execute(ctx context.Context, root *cobra.Command) int {
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if code, ok := errors.AsType[exitCode](err); ok {
		return int(code)
	}
	stderr := root.ErrOrStderr()
	if re, ok := errors.AsType[*runtimeError](err); ok {
		if _, usage := errors.AsType[*usageError](re.err); !usage {
			fmt.Fprintf(stderr, "carapace: %s\n", oneLine(re.err.Error()))
			return 1
		}
	}
	// A usage error: one the command returned as such, or one cobra found
	// parsing the command line before any command ran.
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "carapace: %s (see '%s --help')\n", oneLine(err.Error()), cmd.CommandPath())
	return 2
}

// markRuntime wraps every command's RunE so that Execute can tell the
// errors of a running command (exit 1) from cobra's parsing errors (exit 2)
// without matching message text.
func markRuntime(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if err == nil {
				return nil
			}
			if _, ok := errors.AsType[exitCode](err); ok {
				return err
			}
			return &runtimeError{err: err}
		}
	}
	for _, sub := range c.Commands() {
		markRuntime(sub)
	}
}

// runtimeError is an error returned by a running command.
type runtimeError struct{ err error }

func (e *runtimeError) Error() string { return e.err.Error() }
func (e *runtimeError) Unwrap() error { return e.err }

// usageError is an error in how a command was called (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitCode ends the process with a status and no message, for `carapace
// run`, which exits as its agent command did.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// home resolves the home directory.
func (a *app) home() (home.Dir, error) {
	return home.Resolve(a.homeFlag)
}

// client returns a client of the home's core.
func (a *app) client() (*control.Client, home.Dir, error) {
	h, err := a.home()
	if err != nil {
		return nil, "", err
	}
	return control.NewClient(h.ControlSocket()), h, nil
}

// request returns a client of the home's core and the context of one
// request to it, cut off after requestTimeout; call cancel when done.
func (a *app) request(cmd *cobra.Command) (*control.Client, context.Context, context.CancelFunc, error) {
	c, _, err := a.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	return c, ctx, cancel, nil
}

// call is one request a query makes to the core: the request's context
// (cut off after requestTimeout), the client, the command's arguments and
// where its output goes.
type call struct {
	ctx    context.Context
	client *control.Client
	args   []string
	out    io.Writer
}

// query makes c a command that asks the running core one question and
// prints the answer: as indented JSON with --json (whose help says "print
// the <what> as JSON"), else with text. ask puts the question; text may
// ask a follow-up in the same call.
func query[T any](a *app, c *cobra.Command, what string, ask func(call) (T, error), text func(call, T) error) *cobra.Command {
	var asJSON bool
	c.RunE = func(cmd *cobra.Command, args []string) error {
		client, ctx, cancel, err := a.request(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		q := call{ctx: ctx, client: client, args: args, out: cmd.OutOrStdout()}
		v, err := ask(q)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(q.out, v)
		}
		return text(q, v)
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the "+what+" as JSON")
	return c
}

// groupCmd makes c, a command that only groups subcommands, reject unknown
// subcommands (cobra would print help and exit 0).
func groupCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return cmd.Help()
	}
	return c
}
