package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
)

// EndpointEnv tells the agent command where its session's socket is.
const EndpointEnv = "CARAPACE_IPC_ENDPOINT"

// SessionDirEnv tells an agent command run with the "none" runtime where
// the session's generated files are: CLAUDE.md (with the memory brief) and
// skills/. A container runtime mounts them instead.
const SessionDirEnv = "CARAPACE_SESSION_DIR"

// runtimes are the values `carapace run --runtime` accepts.
var runtimes = api.Runtimes

func (a *app) sessionsCmd() *cobra.Command {
	return query(a, &cobra.Command{
		Use:   "sessions",
		Short: "List the live agent sessions",
		Long: `List the running core's live agent sessions: id, group, runtime, age and
the session's IPC socket.`,
		Example: `  carapace sessions
  carapace sessions --json`,
		Args: cobra.NoArgs,
	}, "sessions", func(q call) ([]api.Session, error) { return q.client.Sessions(q.ctx) },
		func(q call, list []api.Session) error { return printSessions(q.out, list) })
}

// printSessions writes the live sessions as a table.
func printSessions(out io.Writer, list []api.Session) error {
	return printTable(out, list, "no live sessions", "ID\tGROUP\tRUNTIME\tAGE\tSOCKET", func(s api.Session) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", printable(s.ID), printable(s.Group), orDash(s.Runtime),
			age(time.Since(s.Started)), printable(s.Socket))
	})
}

func (a *app) runCmd() *cobra.Command {
	var group, runtime, prompt string
	c := &cobra.Command{
		Use:   "run --group G --runtime R [--prompt TEXT | -- CMD [ARGS...]]",
		Short: "Run an agent in a new session",
		Long: `Open a session for a group on the running core and run an agent in it.

--runtime container (the engine of config.toml's [runtime]; "auto" picks
Apple container on macOS, else Docker, else Podman), docker, podman or apple:
the core runs the agent in a container with no network, a read-only root, no
capabilities, a non-root user and only the session's socket, workspace, skills,
CLAUDE.md and settings.json mounted. With --prompt the image's own agent gets
TEXT (through a read-only file, never the environment); with CMD the image
runs CMD instead. Its output is printed here; carapace exits with the agent's
status. Ctrl-C stops the container.

--runtime none runs CMD as a local process with NO isolation: it can read
your files, use your network and see your environment. Use it for plugin
development only. CMD gets ` + EndpointEnv + `=ipc://<the session's socket> and
` + SessionDirEnv + `=<the folder holding the session's CLAUDE.md and skills>
in its environment, and this terminal's stdin, stdout and stderr. SIGINT and
SIGTERM are passed on to CMD (SIGINT only when it did not come from the
terminal, which already sends it to CMD).

Either way, when the agent exits the session is closed and carapace exits with
its status (128+N if signal N killed it); if carapace itself dies, the core
closes the session. A missing --runtime is a usage error (exit status 2).`,
		Example: `  carapace run --group main --runtime container --prompt "What is on my calendar today?"
  carapace run --group main --runtime docker -- ipc tool.invoke.list_tools
  carapace run --group dev --runtime none -- claude
  carapace run --group dev --runtime none -- sh -c 'echo $` + EndpointEnv + `'`,
		Args:                  cobra.ArbitraryArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := home.CheckGroup(group); err != nil {
				return &usageError{err: fmt.Errorf("--group: %w", err)}
			}
			if !slices.Contains(runtimes, runtime) {
				msg := "pass --runtime container (or docker, podman, apple) to run the agent in a container, or --runtime none to run it without isolation"
				if runtime != "" {
					return usagef("--runtime %q: %s", runtime, msg)
				}
				return usagef("%s", msg)
			}
			if runtime == "none" {
				if prompt != "" {
					return usagef("--prompt needs a container runtime: with --runtime none, run the agent command yourself")
				}
				if len(args) == 0 {
					return usagef("missing the agent command: carapace run --group %s --runtime none -- CMD [ARGS...]", group)
				}
				return a.run(cmd, group, args)
			}
			if prompt != "" && len(args) > 0 {
				return usagef("give --prompt or a command, not both")
			}
			if prompt == "" && len(args) == 0 {
				return usagef("give the agent a --prompt, or a command after --")
			}
			return a.runContainer(cmd, api.SessionRequest{Group: group, Runtime: runtime, Command: args, Prompt: prompt})
		},
	}
	c.Flags().StringVar(&group, "group", "", "the group the session belongs to (required)")
	c.Flags().StringVar(&runtime, "runtime", "", `where the agent runs: container, docker, podman, apple, or none (no isolation) (required)`)
	c.Flags().StringVar(&prompt, "prompt", "", "the prompt for the image's agent (container runtimes)")
	// Everything after CMD belongs to CMD, even without "--".
	c.Flags().SetInterspersed(false)
	return c
}

// runContainer asks the core to run the agent in a container, prints its
// output, and returns exitCode with its status when that is not 0.
func (a *app) runContainer(cmd *cobra.Command, req api.SessionRequest) error {
	c, _, err := a.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sess, err := c.Open(ctx, req)
	if err != nil {
		return err
	}
	defer sess.Close()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	info := sess.Info()
	if sess.Output() == nil {
		return fmt.Errorf("the core opened session %s without a container (runtime %q)", info.ID, info.Runtime)
	}
	fmt.Fprintf(stderr, "carapace: session %s (group %s) running in %s\n", info.ID, info.Group, info.Runtime)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "carapace: stopping session %s\n", info.ID)
			if err := sess.Close(); err != nil {
				fmt.Fprintf(stderr, "carapace: warning: %s\n", oneLine(err.Error()))
			}
			return exitCode(130)
		case o, ok := <-sess.Output():
			if !ok {
				return fmt.Errorf("the core ended session %s before the agent finished (is it stopping?)", info.ID)
			}
			switch {
			case o.Exit != nil:
				if *o.Exit != 0 {
					return exitCode(*o.Exit)
				}
				return nil
			case o.Error != "":
				return fmt.Errorf("session %s: %s", info.ID, o.Error)
			case o.Done != nil: // the agent has finished; its container is going: wait for Exit
			case o.Stream == "stderr":
				io.WriteString(stderr, o.Data)
			default:
				io.WriteString(stdout, o.Data)
			}
		}
	}
}

// run runs the agent command in a new session and returns exitCode with
// its status when that is not 0.
func (a *app) run(cmd *cobra.Command, group string, args []string) error {
	c, _, err := a.client()
	if err != nil {
		return err
	}
	// The session's lifetime is this command's: no timeout here.
	sess, err := c.OpenSession(cmd.Context(), group)
	if err != nil {
		return err
	}
	defer sess.Close()
	info := sess.Info()
	stderr := cmd.ErrOrStderr()
	fmt.Fprintln(stderr, `carapace: warning: the "none" runtime runs the agent as a local process with no isolation: `+
		"it can read your files, use your network and see your environment. Use it for plugin development only.")

	child := exec.Command(args[0], args[1:]...)
	child.Env = append(withoutEnv(withoutEnv(os.Environ(), EndpointEnv), SessionDirEnv), EndpointEnv+"=ipc://"+info.Socket)
	if info.ClaudeMD != "" {
		child.Env = append(child.Env, SessionDirEnv+"="+filepath.Dir(info.ClaudeMD))
	}
	child.Stdin = cmd.InOrStdin()
	child.Stdout = cmd.OutOrStdout()
	child.Stderr = stderr

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		return fmt.Errorf("run %s: %w", args[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- child.Wait() }()
	terminalSIGINT := foregroundTerminal(cmd.InOrStdin())

	var werr error
	streamDone := sess.Done()
wait:
	for {
		select {
		case sig := <-sigs:
			if sig == os.Interrupt && terminalSIGINT {
				continue // the terminal sent it to CMD too
			}
			_ = child.Process.Signal(sig)
		case <-streamDone:
			streamDone = nil
			fmt.Fprintf(stderr, "carapace: warning: the core ended session %s (is it stopping?); %s can no longer reach it\n",
				info.ID, args[0])
		case werr = <-waited:
			break wait
		}
	}
	if err := sess.Close(); err != nil {
		fmt.Fprintf(stderr, "carapace: warning: %s\n", oneLine(err.Error()))
	}
	if werr == nil {
		return nil
	}
	if ee, ok := errors.AsType[*exec.ExitError](werr); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitCode(128 + int(ws.Signal()))
		}
		return exitCode(ee.ExitCode())
	}
	return fmt.Errorf("run %s: %w", args[0], werr)
}

// foregroundTerminal reports whether in is a terminal whose foreground
// process group is ours: then a SIGINT typed there reaches the agent
// command, which shares our process group, without our help.
func foregroundTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// withoutEnv drops the variable key from env.
func withoutEnv(env []string, key string) []string {
	return slices.DeleteFunc(env, func(kv string) bool {
		return strings.HasPrefix(kv, key+"=")
	})
}
