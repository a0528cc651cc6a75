package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/audit"
)

// outcomes are the values --outcome accepts.
var outcomes = []string{
	audit.OutcomeRouted, audit.OutcomeOK, audit.OutcomeSanitized, audit.OutcomeRejected, audit.OutcomeError,
	audit.OutcomePending, audit.OutcomeApproved, audit.OutcomeDenied, audit.OutcomeExpired,
	audit.OutcomeOpened, audit.OutcomeClosed, audit.OutcomeStarted,
}

func (a *app) auditCmd() *cobra.Command {
	var (
		f      audit.Filter
		follow bool
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log",
		Long: `Show the audit log, $CARAPACE_HOME/logs/audit.jsonl (rotated files
included), oldest first: one line per entry with time, session, group,
topic, stage, outcome, error code, reason and duration. Arguments and
results are never logged. Works whether or not a core is running.

--outcome error matches every failed entry, rejected ones included.
--follow keeps printing new entries until interrupted; with --last it
first prints the last N matching entries. --json prints the entries as
JSON Lines.`,
		Example: `  carapace audit --last 50
  carapace audit --outcome error --follow
  carapace audit --session 3f9c1d --json | jq .reason
  carapace audit --correlation 0b7e4a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Last < 0 {
				return usagef("--last must not be negative")
			}
			if f.Outcome != "" && !slices.Contains(outcomes, f.Outcome) {
				return usagef("--outcome %q: want one of %s", f.Outcome, strings.Join(outcomes, ", "))
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			emit := func(e audit.Entry) error {
				if asJSON {
					return writeJSONLine(out, e)
				}
				return printEntry(out, &e)
			}
			if follow {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				err := audit.Follow(ctx, h.AuditLog(), f, emit)
				if errors.Is(err, context.Canceled) && ctx.Err() != nil {
					return nil
				}
				return err
			}
			entries, err := audit.Read(h.AuditLog(), f)
			if err != nil {
				return err
			}
			if len(entries) == 0 && !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "carapace: no matching audit entries in %s\n", h.AuditLog())
			}
			for _, e := range entries {
				if err := emit(e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.Session, "session", "", "only entries of this session")
	fl.StringVar(&f.Correlation, "correlation", "", "only entries with this correlation id")
	fl.StringVar(&f.Group, "group", "", "only entries of this group")
	fl.StringVar(&f.Outcome, "outcome", "", `only entries with this outcome ("error" matches every failure)`)
	fl.IntVar(&f.Last, "last", 0, "only the last N matching entries (0: all)")
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new entries until interrupted")
	fl.BoolVar(&asJSON, "json", false, "print entries as JSON Lines")
	_ = c.RegisterFlagCompletionFunc("outcome", cobra.FixedCompletions(outcomes, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// printEntry prints one entry on one line: time, session, group, topic,
// stage, outcome, code, reason (quoted) and duration; "-" for empty fields.
func printEntry(w io.Writer, e *audit.Entry) error {
	reason := "-"
	if e.Reason != "" {
		reason = strconv.Quote(e.Reason) // also escapes control characters
	}
	dur := "-"
	if e.DurationMS > 0 {
		dur = strconv.FormatFloat(e.DurationMS, 'f', 1, 64) + "ms"
	}
	_, err := fmt.Fprintf(w, "%s  %-16s %-12s %-26s %-9s %-9s %-18s %s %s\n",
		e.Time.Local().Format("2006-01-02 15:04:05.000"), orDash(e.Session), orDash(e.Group), orDash(e.Topic),
		orDash(e.Stage), orDash(e.Outcome), orDash(e.Code), reason, dur)
	return err
}
