package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
)

func (a *app) watchCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "watch",
		Short: "Follow the core: sessions, confirmations and plugin health as they change",
		Long: `Print what the running core is doing as it happens: first a summary of
its state, then one line per change — a session opened or closed, a tool
call waiting for your confirmation (with the command that approves it) and
how it was decided, a plugin's health. Nothing is polled: the core sends
each change on its watch stream (GET /v1/watch on the control socket).

--json prints the stream's own lines, one JSON object each: the snapshot
first, then the changes (docs/PROTOCOL.md's control API section says what
they hold).

carapace watch runs until you stop it (Ctrl-C: exit status 0) or the core
ends the stream (it stops, or this terminal fell so far behind that the core
cut it off: exit status 1; watch again).`,
		Example: `  carapace watch
  carapace watch --json | jq 'select(.type == "confirmation.requested")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ws, err := c.Watch(cmd.Context())
			if err != nil {
				return err
			}
			defer ws.Close()
			out := cmd.OutOrStdout()
			for {
				ev, err := ws.Next()
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil // interrupted
					}
					if errors.Is(err, io.EOF) {
						return errors.New("the core ended the watch stream")
					}
					return err
				}
				if asJSON {
					if err := writeJSONLine(out, ev); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(out, watchLine(ev))
				}
				if ev.Type == api.WatchEnd {
					return fmt.Errorf("the core ended the watch: %s", printable(ev.Error))
				}
			}
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the stream's JSON lines")
	return c
}

// watchLine is one line of the watch stream for people.
func watchLine(ev api.WatchEvent) string {
	at := ev.Time.Local().Format("15:04:05")
	switch ev.Type {
	case api.WatchSnapshot:
		var b strings.Builder
		fmt.Fprintf(&b, "%s core", at)
		if st := ev.Status; st != nil {
			fmt.Fprintf(&b, " %s (pid %d)", printable(st.Version), st.PID)
			if st.Draining {
				b.WriteString(" stopping")
			}
			if st.Paused {
				b.WriteString(" paused")
			}
		}
		healthy := 0
		for _, p := range ev.Plugins {
			if p.Healthy {
				healthy++
			}
		}
		fmt.Fprintf(&b, ": %d sessions, %d pending confirmations, %d of %d plugins healthy",
			len(ev.Sessions), len(ev.Confirmations), healthy, len(ev.Plugins))
		for _, cf := range ev.Confirmations {
			b.WriteString("\n" + at + " " + pendingLine(cf))
		}
		return b.String()
	case api.WatchSessionOpened, api.WatchSessionClosed:
		verb := "opened"
		if ev.Type == api.WatchSessionClosed {
			verb = "closed"
		}
		if s := ev.Session; s != nil {
			return fmt.Sprintf("%s session %s %s: group %s, runtime %s", at, printable(s.ID), verb, printable(s.Group), printable(s.Runtime))
		}
	case api.WatchConfirmationRequested:
		if cf := ev.Confirmation; cf != nil {
			return at + " " + pendingLine(*cf)
		}
	case api.WatchConfirmationResolved:
		if cf := ev.Confirmation; cf != nil {
			return fmt.Sprintf("%s confirmation %s %s: %s", at, api.ShortID(cf.ID), printable(cf.Tool), decidedHow(*cf))
		}
	case api.WatchPluginHealth:
		if p := ev.Plugin; p != nil {
			state := p.State
			if p.Category != "" {
				state += ": " + p.Category
			}
			return fmt.Sprintf("%s plugin %s %s", at, printable(p.Name), printable(state))
		}
	case api.WatchStatus:
		if st := ev.Status; st != nil {
			state := "running"
			switch {
			case st.Draining:
				state = "stopping"
			case st.Paused:
				state = "paused: no sessions for events"
			}
			return fmt.Sprintf("%s core %s", at, state)
		}
	case api.WatchTaskCreated, api.WatchTaskChanged, api.WatchTaskRemoved:
		if t := ev.Task; t != nil {
			what := map[string]string{api.WatchTaskCreated: "created", api.WatchTaskRemoved: "removed"}[ev.Type]
			if what == "" {
				what = "resumed"
				if !t.Enabled {
					what = "paused"
					if t.PausedReason != "" {
						what += ": " + printable(t.PausedReason)
					}
				}
			}
			return fmt.Sprintf("%s task %s %s: %s, group %s", at, t.ID, what, printable(t.Schedule), printable(t.Group))
		}
	case api.WatchTaskFired, api.WatchTaskFinished:
		if t, r := ev.Task, ev.TaskRun; t != nil && r != nil {
			if ev.Type == api.WatchTaskFired {
				late := ""
				if r.LateMS >= 1000 {
					late = ", late " + age(time.Duration(r.LateMS)*time.Millisecond)
				}
				return fmt.Sprintf("%s task %s fired (run %d, due %s%s)", at, t.ID, r.ID, r.Scheduled.Local().Format("15:04:05"), late)
			}
			outcome := r.State
			if r.Reason != "" {
				outcome += ": " + printable(oneLine(r.Reason))
			}
			return fmt.Sprintf("%s task %s run %d %s", at, t.ID, r.ID, outcome)
		}
	case api.WatchEnd:
		return fmt.Sprintf("%s the core ended the watch: %s", at, printable(ev.Error))
	}
	return fmt.Sprintf("%s %s", at, printable(ev.Type))
}

// pendingLine describes a confirmation waiting for the user, with the
// command that approves it.
//
// The line points to approve only when it shows every argument as it
// runs; otherwise to show, which prints them whole (--raw, when the
// display hides something).
func pendingLine(cf api.Confirmation) string {
	args := compactJSON(cf.Arguments, argsWidth)
	next := "carapace confirm approve " + api.ShortID(cf.ID)
	switch {
	case cf.ArgumentsOmitted:
		args, next = "(large)", "carapace confirm show "+api.ShortID(cf.ID)
	case len(cf.Hidden) > 0:
		args = fmt.Sprintf("(%d hidden) %s", len(cf.Hidden), args)
		next = "carapace confirm show --raw " + api.ShortID(cf.ID)
	case args != compactJSON(cf.Arguments, 0):
		next = "carapace confirm show " + api.ShortID(cf.ID)
	}
	if cf.Preview != "" || cf.PreviewOmitted { // a line cannot show it: read it whole first
		args = "(with a preview: read it first) " + args
		next = "carapace confirm show " + api.ShortID(cf.ID)
	}
	if len(cf.Why) > 0 { // why the core asks, each reason whole
		args = "(why: " + printable(strings.Join(cf.Why, "; ")) + ") " + args
	}
	return fmt.Sprintf("confirmation %s waits: %s for group %s (session %s): %s — %s",
		api.ShortID(cf.ID), printable(cf.Tool), printable(cf.Group), printable(cf.Session), args, next)
}
