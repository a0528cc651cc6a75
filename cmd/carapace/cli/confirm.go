package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/control"
)

// argsWidth is how much of a confirmation's arguments a list shows.
const argsWidth = 60

func (a *app) confirmCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "confirm",
		Short: "List, approve or deny tool calls waiting for you",
		Long: `High-risk tools wait for your confirmation before they run. A pending
confirmation binds the exact tool and a hash of its arguments; nobody
answering before it expires counts as a denial.`,
		Example: `  carapace confirm list
  carapace confirm approve 7f3a9c
  carapace confirm deny 7f3a9c`,
	})
	c.AddCommand(a.confirmListCmd(), a.confirmDecideCmd(true), a.confirmDecideCmd(false))
	return c
}

func (a *app) confirmListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the pending confirmations",
		Long: `List the pending confirmations: id, tool, group, session, age, time left
before it expires (and counts as denied), and the arguments as the core
sanitised them, cut to one line. The id is shown by its first 8
characters: approve or deny takes any unique prefix of 6 or more. --json
prints them in full.`,
		Example: `  carapace confirm list
  carapace confirm list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			list, err := c.Confirmations(ctx, false)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "no pending confirmations")
				return nil
			}
			now := time.Now()
			tw := table(out)
			fmt.Fprintln(tw, "ID\tTOOL\tGROUP\tSESSION\tAGE\tLEFT\tARGUMENTS")
			for _, p := range list {
				left := "expired"
				if p.ExpiresAt.After(now) {
					left = age(p.ExpiresAt.Sub(now))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortID(p.ID), printable(p.Tool), orDash(p.Group),
					orDash(p.Session), age(now.Sub(p.CreatedAt)), left, compactJSON(p.Arguments, argsWidth))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the confirmations as JSON")
	return c
}

// confirmDecideCmd is `confirm approve` or `confirm deny`.
func (a *app) confirmDecideCmd(approve bool) *cobra.Command {
	verb, doing, done := "deny", "Denying", "denied"
	if approve {
		verb, doing, done = "approve", "Approving", "approved"
	}
	c := &cobra.Command{
		Use:   verb + " ID",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a pending tool call",
		Long: strings.ToUpper(verb[:1]) + verb[1:] + ` a pending tool call. ID is the confirmation's id or a unique prefix of
at least 6 characters of it (an ambiguous one is refused). carapace first
fetches the confirmation and prints the tool and arguments you are
deciding, then decides exactly those: the decision carries the hash of the
arguments shown, and the core refuses it if they no longer match.

The first decision wins, wherever it is made (here, the menu bar, a
notification, the phone): if another came first, carapace says which and
exits with status 1.`,
		Example:           "  carapace confirm " + verb + " 7f3a9c",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeConfirmation,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			p, err := c.Confirmation(ctx, args[0])
			if err != nil {
				return err
			}
			if !p.Pending() {
				return fmt.Errorf("confirmation %s is already decided: %s: %w", printable(p.ID), decidedHow(p), control.ErrConflict)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s %s for group %s (session %s, expires in %s)\n", doing, printable(p.Tool), orDash(p.Group), orDash(p.Session), age(time.Until(p.ExpiresAt)))
			for _, l := range strings.Split(p.Summary, "\n") {
				if l = printable(l); l != "" {
					fmt.Fprintf(out, "  %s\n", l)
				}
			}
			fmt.Fprintf(out, "  arguments: %s\n", compactJSON(p.Arguments, 0))
			fmt.Fprintf(out, "  digest:    %s\n", printable(p.ArgsHash))
			got, err := c.Decide(ctx, control.Decision{ID: p.ID, Approve: approve, ArgsHash: p.ArgsHash, Surface: "cli", Decider: decider()})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s %s\n", done, printable(got.ID))
			return nil
		},
	}
	return c
}

// decidedHow says how a resolved confirmation ended, for people.
func decidedHow(p control.Confirmation) string {
	how := p.Decision
	if p.Surface != "" && p.Surface != "core" {
		how += " on " + printable(p.Surface)
		if p.Decider != "" {
			how += " by " + printable(p.Decider)
		}
	}
	if p.DecidedAt != nil {
		how += ", " + age(time.Since(*p.DecidedAt)) + " ago"
	}
	if p.Reason != "" {
		how += " (" + printable(p.Reason) + ")"
	}
	return how
}

// decider names the person deciding at this terminal: the login name.
func decider() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// completeConfirmation completes pending confirmation ids.
func (a *app) completeConfirmation(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, _, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	list, err := c.Confirmations(ctx, false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, 0, len(list))
	for _, p := range list {
		ids = append(ids, p.ID+"\t"+printable(p.Tool))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
