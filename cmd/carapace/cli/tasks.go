package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
)

func (a *app) tasksCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "tasks",
		Short: "Schedule prompts for your agent: add, list, show, pause, resume, run, rm, history",
		Long: `A scheduled task gives the agent a prompt at set times, in a session of
its group, like any event. Every occurrence is accounted for (carapace tasks
history): it ran (ok or failed), was skipped (missed while the core was not
running, overlap with a run still working, or paused), or is unknown (the
core died while it ran; it is never run again by itself). After a sleep or
a restart, missed slots run once, late, by default (--misfire catch-up-once)
or not at all (--misfire skip). A task that fails 3 times in a row
([tasks] max_failures) pauses itself. A removed task (carapace tasks rm,
or the agent's cancel_task) fires no more and is kept, with its runs:
tasks list --all, tasks show and tasks history still have it.`,
		Example: `  carapace tasks add --group main --cron "0 7 * * *" --tz Europe/Berlin --prompt "Summarise my calendar for today"
  carapace tasks add --group main --every 90m --prompt "Check the build"
  carapace tasks add --group main --at "2026-12-24 18:00" --tz America/New_York --prompt "Remind me to call home"
  carapace tasks list
  carapace tasks show t-ab12cd34
  carapace tasks history t-ab12cd34`,
	})
	c.AddCommand(a.tasksAddCmd(), a.tasksListCmd(), a.tasksShowCmd(), a.tasksHistoryCmd(), a.tasksRmCmd(),
		a.tasksActionCmd("pause", "Stop a task from firing (its slots until resume are not run)"),
		a.tasksActionCmd("resume", "Start a paused task again, from now (what it missed is not caught up)"),
		a.tasksActionCmd("run", "Run a task once now, without shifting its schedule"))
	return c
}

func (a *app) tasksAddCmd() *cobra.Command {
	var req api.TaskRequest
	var cronExpr, every, at string
	c := &cobra.Command{
		Use:   "add --group G (--cron EXPR | --every DUR | --at TIME) --prompt TEXT",
		Short: "Schedule a prompt",
		Long: `Schedule a prompt for the agent of a group. Exactly one schedule:

  --cron EXPR   five fields (minute hour day-of-month month weekday) or
                @hourly, @daily, @weekly, @monthly; read in --tz
  --every DUR   a Go duration of at least 1s (90m, 1h30m, 24h), from now
  --at TIME     once: 2026-12-24 18:00 (read in --tz) or RFC 3339 with an
                offset (2026-12-24T18:00:00+01:00)

--tz is an IANA zone (Europe/Berlin); default UTC. On daylight-saving days a
local time that does not exist fires once when the clocks have jumped, and
a repeated one fires once, the first time. carapace prints the schedule in
words and its next three fire times.`,
		Example: `  carapace tasks add --group main --cron "0 7 * * 1-5" --tz Europe/Berlin --prompt "Summarise my calendar"
  carapace tasks add --group main --every 1h --misfire skip --prompt "Look for new mail from my bank"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for kind, expr := range map[string]string{"cron": cronExpr, "every": every, "at": at} {
				if expr != "" {
					req.Kind, req.Expr = kind, expr
					n++
				}
			}
			if n != 1 {
				return &usageError{err: errors.New("give exactly one of --cron, --every or --at (carapace tasks add --help)")}
			}
			if req.Group == "" || req.Prompt == "" {
				return &usageError{err: errors.New("--group and --prompt are required (carapace tasks add --help)")}
			}
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			t, err := c.AddTask(ctx, req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "task %s: %s, for group %s\n", t.ID, printable(t.Schedule), t.Group)
			if len(t.NextFires) == 0 {
				fmt.Fprintln(out, "  it will not fire")
			}
			for _, f := range t.NextFires {
				fmt.Fprintf(out, "  next: %s\n", inZone(f, t.Zone))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&req.Group, "group", "", "the group whose agent runs the prompt")
	f.StringVar(&cronExpr, "cron", "", "a cron expression (5 fields, or @daily…)")
	f.StringVar(&every, "every", "", "a duration of at least 1s")
	f.StringVar(&at, "at", "", "one time: \"2006-01-02 15:04\" in --tz, or RFC 3339")
	f.StringVar(&req.Zone, "tz", "", "IANA time zone of the schedule (default UTC)")
	f.StringVar(&req.Misfire, "misfire", "", "after missed slots: catch-up-once (default) or skip")
	f.StringVar(&req.Prompt, "prompt", "", "what the agent is asked each time")
	return c
}

// inZone formats t in zone (UTC if it does not load).
func inZone(t time.Time, zone string) string {
	if loc, err := time.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	return t.Format("Mon 2006-01-02 15:04 MST")
}

// listPrompt is how many characters of a prompt tasks list shows.
const listPrompt = 40

func (a *app) tasksListCmd() *cobra.Command {
	var all bool
	c := query(a, &cobra.Command{
		Use:   "list",
		Short: "List the tasks: schedule, next fire, last outcome, prompt",
		Long: `List the tasks: id, group, schedule in words, next fire (in the task's
zone), how the newest run went, with its lateness, and the head of its
prompt (carapace tasks show ID prints a prompt in full). --all lists the
removed tasks too; --json prints every field, prompts in full.`,
		Example: "  carapace tasks list\n  carapace tasks list --all\n  carapace tasks list --json",
		Args:    cobra.NoArgs,
	}, "tasks", func(q call) ([]api.Task, error) {
		if all {
			return q.client.AllTasks(q.ctx)
		}
		return q.client.Tasks(q.ctx)
	}, func(q call, list []api.Task) error { return printTasks(q.out, list) })
	c.Flags().BoolVar(&all, "all", false, "list the removed tasks too")
	return c
}

// printTasks writes the tasks as a table, each prompt's head.
func printTasks(out io.Writer, list []api.Task) error {
	cut := false
	err := printTable(out, list, "no tasks (carapace tasks add --help)", "ID\tGROUP\tSCHEDULE\tNEXT\tLAST\tPROMPT", func(t api.Task) string {
		prompt := printable(oneLine(t.Prompt))
		cut = cut || prompt != t.Prompt || utf8.RuneCountInString(prompt) > listPrompt
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", t.ID, t.Group, printable(t.Schedule), taskNext(t), lastRun(t.Last), truncate(prompt, listPrompt))
	})
	if err != nil {
		return err
	}
	if cut {
		fmt.Fprintln(out, "(prompts are cut: carapace tasks show ID prints one in full)")
	}
	return nil
}

// taskNext says when t fires next, or why it does not.
func taskNext(t api.Task) string {
	switch {
	case t.RemovedAt != nil:
		return "removed " + t.RemovedAt.UTC().Format("2006-01-02 15:04 MST") + " by the " + printable(t.RemovedBy)
	case !t.Enabled && t.PausedReason != "":
		return "paused: " + printable(t.PausedReason)
	case !t.Enabled:
		return "paused"
	case t.Next != nil:
		return inZone(*t.Next, t.Zone)
	}
	return "-"
}

// removal says when and by whom t was removed, as core/tasks's
// Removal.Describe does.
func removal(t api.Task) string {
	if t.RemovedAt == nil {
		return ""
	}
	s := t.RemovedAt.UTC().Format("2006-01-02 15:04 MST") + " by the " + printable(t.RemovedBy)
	if t.RemovedSession != "" {
		s += " (session " + printable(t.RemovedSession)
		if t.RemovedConfirmation != "" {
			s += ", approved by the user: confirmation " + printable(t.RemovedConfirmation)
		}
		s += ")"
	}
	return s
}

func (a *app) tasksShowCmd() *cobra.Command {
	return query(a, &cobra.Command{
		Use:   "show ID",
		Short: "Show one task, its prompt in full",
		Long: `Show one task, live or removed: its schedule, state, next fire, who made
it (and who removed it), its newest run, and its prompt in full — the text
each of its runs gives the agent, never sanitised and never cut. Control
and invisible characters (escape sequences, bidi overrides) are shown as
\uXXXX so that what you read is what is stored; --json prints the stored
text exactly.`,
		Example:           "  carapace tasks show t-ab12cd34\n  carapace tasks show t-ab12cd34 --json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeTask,
	}, "task", func(q call) (api.Task, error) { return q.client.Task(q.ctx, q.args[0]) },
		func(q call, t api.Task) error {
			printTask(q.out, t)
			return nil
		})
}

// printTask writes t for tasks show, its prompt in full.
func printTask(out io.Writer, t api.Task) {
	tw := table(out)
	fmt.Fprintf(tw, "task %s\n", t.ID)
	fmt.Fprintf(tw, "  group\t%s\n", printable(t.Group))
	fmt.Fprintf(tw, "  schedule\t%s\t(%s %q in %s)\n", printable(t.Schedule), printable(t.Kind), printable(t.Expr), printable(t.Zone))
	state := "enabled"
	switch {
	case t.RemovedAt != nil:
		state = "removed on " + removal(t)
	case !t.Enabled:
		state = strings.TrimPrefix(taskNext(t), "-")
	}
	fmt.Fprintf(tw, "  state\t%s\n", state)
	if t.RemovedAt == nil && t.Enabled {
		fmt.Fprintf(tw, "  next\t%s\n", taskNext(t))
	}
	made := "made by the " + printable(t.Creator)
	if t.CreatorSession != "" {
		made += " (session " + printable(t.CreatorSession)
		if t.CreatorConfirmation != "" {
			made += ", approved by the user: confirmation " + printable(t.CreatorConfirmation)
		}
		made += ")"
	}
	fmt.Fprintf(tw, "  created\t%s, %s\n", t.CreatedAt.UTC().Format("2006-01-02 15:04 MST"), made)
	fmt.Fprintf(tw, "  misfire\t%s\n", printable(t.Misfire))
	fmt.Fprintf(tw, "  last run\t%s\n", lastRun(t.Last))
	_ = tw.Flush()
	fmt.Fprintf(out, "  prompt, in full (%d characters; control and invisible characters as \\uXXXX):\n", utf8.RuneCountInString(t.Prompt))
	for _, line := range strings.Split(t.Prompt, "\n") {
		fmt.Fprintf(out, "    %s\n", printable(line))
	}
}

// lastRun says how a run went, for the list.
func lastRun(r *api.TaskRun) string {
	if r == nil {
		return "-"
	}
	s := r.State
	if r.Reason != "" {
		s += " (" + printable(oneLine(r.Reason)) + ")"
	}
	if r.LateMS >= 1000 {
		s += ", late " + age(time.Duration(r.LateMS)*time.Millisecond)
	}
	return s + ", " + r.Scheduled.Local().Format("2006-01-02 15:04")
}

func (a *app) tasksHistoryCmd() *cobra.Command {
	var limit int
	c := query(a, &cobra.Command{
		Use:               "history ID",
		Short:             "Show how a task's occurrences went, newest first",
		Long:              "Show a task's occurrences, newest first: when each was due, how it ended, how late it started and its session. A run of missed slots beyond the first hundred is one line with their count. A removed task's runs are kept, and shown with who removed it.",
		Example:           "  carapace tasks history t-ab12cd34\n  carapace tasks history t-ab12cd34 --json --limit 500",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeTask,
	}, "runs", func(q call) ([]api.TaskRun, error) {
		return q.client.TaskHistory(q.ctx, q.args[0], limit)
	}, func(q call, runs []api.TaskRun) error {
		if t, err := q.client.Task(q.ctx, q.args[0]); err == nil && t.RemovedAt != nil {
			fmt.Fprintf(q.out, "task %s was removed on %s; it fires no more\n", t.ID, removal(t))
		}
		return printRuns(q.out, runs)
	})
	c.Flags().IntVar(&limit, "limit", 50, fmt.Sprintf("how many runs (at most %d)", api.MaxTaskHistory))
	return c
}

// printRuns writes a task's runs as a table.
func printRuns(out io.Writer, runs []api.TaskRun) error {
	return printTable(out, runs, "no runs yet", "DUE\tOUTCOME\tLATE\tSESSION", func(r api.TaskRun) string {
		due := r.Scheduled.Local().Format("2006-01-02 15:04:05")
		if r.Count > 1 && r.Until != nil {
			due += fmt.Sprintf(" … %s (%d slots)", r.Until.Local().Format("2006-01-02 15:04:05"), r.Count)
		}
		if r.Manual {
			due += " (run now)"
		}
		outcome := r.State
		if r.Reason != "" {
			outcome += ": " + printable(oneLine(r.Reason))
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s", due, outcome, age(time.Duration(r.LateMS)*time.Millisecond), orDash(r.Session))
	})
}

func (a *app) tasksRmCmd() *cobra.Command {
	var purge bool
	c := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a task: it fires no more, and is kept with its runs",
		Long: `Remove a task: it fires no more (a run in flight goes on), and it is kept,
with its runs, for tasks list --all, tasks show and tasks history, marked
removed by you. --purge deletes the task and its runs for good, removed or
not.`,
		Example:           "  carapace tasks rm t-ab12cd34\n  carapace tasks rm --purge t-ab12cd34",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out, id := cmd.OutOrStdout(), args[0]
			if purge {
				if err := c.PurgeTask(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(out, "task %s and its runs deleted\n", id)
				return nil
			}
			if err := c.RemoveTask(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(out, "task %s removed: it fires no more; carapace tasks history %s keeps its runs (tasks rm --purge %s deletes them)\n", id, id, id)
			return nil
		},
	}
	c.Flags().BoolVar(&purge, "purge", false, "delete the task and its runs for good")
	return c
}

// tasksActionCmd is tasks pause, resume or run.
func (a *app) tasksActionCmd(verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:               verb + " ID",
		Short:             short,
		Long:              short + ". ID is the task's id (carapace tasks list).",
		Example:           "  carapace tasks " + verb + " t-ab12cd34",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out, id := cmd.OutOrStdout(), args[0]
			switch verb {
			case "pause":
				if _, err = c.PauseTask(ctx, id); err == nil {
					fmt.Fprintf(out, "task %s paused\n", id)
				}
			case "resume":
				var t api.Task
				if t, err = c.ResumeTask(ctx, id); err == nil {
					next := "no next fire"
					if t.Next != nil {
						next = "next: " + inZone(*t.Next, t.Zone)
					}
					fmt.Fprintf(out, "task %s resumed (%s)\n", id, next)
				}
			case "run":
				var r api.TaskRun
				if r, err = c.RunTask(ctx, id); err == nil {
					fmt.Fprintf(out, "task %s started (run %d): carapace tasks history %s\n", id, r.ID, id)
				}
			default:
				err = errors.New("unknown action " + verb)
			}
			return err
		},
	}
}

// completeTask completes a task id from the running core.
func (a *app) completeTask(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, _, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	list, err := c.Tasks(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, 0, len(list))
	for _, t := range list {
		ids = append(ids, t.ID+"\t"+printable(t.Schedule))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
