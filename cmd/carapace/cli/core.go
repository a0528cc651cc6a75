package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
)

func (a *app) serveCmd() *cobra.Command {
	var level string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the core in the foreground",
		Long: `Run the Carapace core in the foreground until SIGINT or SIGTERM (or
carapace stop), then shut down gracefully: stop taking new work, let
in-flight tool calls finish, shut plugins down and close sessions. A second
interrupt exits at once.

Logs go to stderr. Only one core runs per home: serve refuses to start if
another core answers on the home's control socket.`,
		Example: `  carapace serve
  carapace serve --log-level debug
  carapace --home /tmp/carapace-dev serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(level)); err != nil {
				return usagef("--log-level %q: want debug, info, warn or error", level)
			}
			if a.cfg.Serve == nil {
				return errors.New("this build of carapace cannot run a core")
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				// After the first signal, restore the default handling so
				// that a second one ends the process at once.
				<-ctx.Done()
				stop()
			}()
			return a.cfg.Serve(ctx, h, logger)
		},
	}
	c.Flags().StringVar(&level, "log-level", "info", "log level: debug, info, warn or error")
	return c
}

func (a *app) statusCmd() *cobra.Command {
	return query(a, &cobra.Command{
		Use:   "status",
		Short: "Show the running core's status",
		Long: `Show the running core's status: version, pid, uptime, home, live sessions,
pending confirmations, tools, plugin health, whether it is draining
(stopping), and the container engines it uses: their version and the CLI
it runs, with where it was found (a login item's PATH is minimal, so Apple's
container may be found where Homebrew or MacPorts put it). Fails if no core
is running.`,
		Example: `  carapace status
  carapace status --json | jq .plugins`,
		Args: cobra.NoArgs,
	}, "status", func(q call) (api.Status, error) { return q.client.Status(q.ctx) },
		func(q call, st api.Status) error { return printStatus(q.out, st) })
}

func printStatus(out io.Writer, st api.Status) error {
	tw := table(out)
	fmt.Fprintf(tw, "version\t%s\n", printable(st.Version))
	fmt.Fprintf(tw, "pid\t%d\n", st.PID)
	fmt.Fprintf(tw, "uptime\t%s\n", age(time.Since(st.Started)))
	fmt.Fprintf(tw, "home\t%s\n", printable(st.Home))
	fmt.Fprintf(tw, "sessions\t%d\n", st.Sessions)
	pending := fmt.Sprint(st.PendingConfirmations)
	if st.PendingConfirmations > 0 {
		pending += " (carapace confirm list)"
	}
	fmt.Fprintf(tw, "pending confirmations\t%s\n", pending)
	fmt.Fprintf(tw, "tools\t%d\n", st.Tools)
	draining := "no"
	if st.Draining {
		draining = "yes (stopping)"
	}
	fmt.Fprintf(tw, "draining\t%s\n", draining)
	if st.Paused {
		fmt.Fprintf(tw, "paused\tyes: no sessions for events (carapace resume)\n")
	}
	if len(st.Engines) == 0 {
		fmt.Fprintf(tw, "engines\tnone checked yet (the first container session checks one)\n")
	}
	for i, e := range st.Engines {
		label := ""
		if i == 0 {
			label = "engines"
		}
		bin := orDash(e.Bin)
		if e.BinFrom != "" {
			bin += " (" + e.BinFrom + ")"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\n", label, printable(e.Name), printable(e.Version), printable(bin))
	}
	for i, w := range st.Warm {
		label := ""
		if i == 0 {
			label = "warm containers"
		}
		fmt.Fprintf(tw, "%s\t%s\tgroup %s, waiting %s\n", label, printable(w.Container), printable(w.Group), age(time.Since(w.Started)))
	}
	if len(st.Plugins) == 0 {
		fmt.Fprintf(tw, "plugins\tnone\n")
	}
	for i, p := range st.Plugins {
		label := ""
		if i == 0 {
			label = "plugins"
		}
		health := "healthy"
		switch {
		case p.State == "degraded":
			health = "degraded: " + printable(p.Problem)
		case p.State == api.PluginRestarting:
			health = "restarting after a crash" + revivalNote(p, time.Now())
		case p.State == api.PluginDown:
			health = "down after repeated crashes: carapace plugin restart " + printable(p.Name)
		case !p.Healthy:
			health = "failed: " + orDash(p.Category)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, printable(p.Name), health)
	}
	return tw.Flush()
}

func (a *app) stopCmd() *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "stop",
		Short: "Stop the running core gracefully",
		Long: `Ask the running core to stop, then wait until its control socket stops
answering. The core stops taking new work, lets in-flight tool calls finish,
shuts plugins down and closes every session, including those of carapace
run. Fails if the core is still answering after --timeout.`,
		Example: `  carapace stop
  carapace stop --timeout 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			c, h, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			st, err := c.Status(ctx)
			if err == nil {
				err = c.Stop(ctx)
			}
			cancel()
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "carapace: stopping the core at %s (pid %d); waiting up to %s\n", h, st.PID, timeout)
			start := time.Now()
			deadline := start.Add(timeout)
			nextNote := start.Add(5 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(cmd.Context(), time.Second)
				_, err := c.Status(ctx)
				cancel()
				if errors.Is(err, control.ErrNotRunning) {
					fmt.Fprintf(stderr, "carapace: core stopped after %s\n", age(time.Since(start)))
					return nil
				}
				now := time.Now()
				if now.After(deadline) {
					return fmt.Errorf("the core at %s is still running after %s (pid %d)", h, timeout, st.PID)
				}
				if now.After(nextNote) {
					fmt.Fprintf(stderr, "carapace: still stopping (%s)\n", age(now.Sub(start)))
					nextNote = now.Add(5 * time.Second)
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the core to stop")
	return c
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's version, and the running core's",
		Long: `Print this carapace binary's version and, if a core is running for the
home, the core's version and pid.`,
		Example: `  carapace version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "carapace %s\n", a.cfg.Version)
			c, h, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
			defer cancel()
			st, err := c.Status(ctx)
			switch {
			case errors.Is(err, control.ErrNotRunning):
				fmt.Fprintf(out, "core not running at %s\n", h)
			case err != nil:
				fmt.Fprintf(out, "core unknown (%s)\n", oneLine(err.Error()))
			default:
				fmt.Fprintf(out, "core %s (pid %d)\n", printable(st.Version), st.PID)
			}
			return nil
		},
	}
}

// pauseCmd is `carapace pause` or `carapace resume`.
func (a *app) pauseCmd(paused bool) *cobra.Command {
	use, short, long := "resume", "Start sessions for events again", `Undo carapace pause: messages from channels and scheduled tasks start
agent sessions again.`
	if paused {
		use, short, long = "pause", "Stop starting sessions for events; running ones go on", `Stop starting agent sessions for events — messages from channels, scheduled
tasks — until carapace resume. Sessions that run go on; carapace run (and
the app) can still start sessions. An event that arrives while paused is
dropped, logged and audited; the core does not keep it for later. A core
that restarts is not paused.`
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: "  carapace " + use,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			st, err := c.Pause(ctx, paused)
			if err != nil {
				return err
			}
			if st.Paused {
				fmt.Fprintln(cmd.OutOrStdout(), "paused: no session starts for events until carapace resume")
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "resumed: sessions start for events")
			}
			return nil
		},
	}
}
