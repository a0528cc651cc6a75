package cli

import (
	"context"
	"fmt"
	"slices"
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
sanitised them, cut to one line. --json prints them in full.`,
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
			list, err := c.Confirmations(ctx)
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
				if p.Expires.After(now) {
					left = age(p.Expires.Sub(now))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(p.ID), printable(p.Tool), orDash(p.Group),
					orDash(p.Session), age(now.Sub(p.Created)), left, compactJSON(p.Arguments, argsWidth))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the confirmations as JSON")
	return c
}

// confirmDecideCmd is `confirm approve` or `confirm deny`.
func (a *app) confirmDecideCmd(approve bool) *cobra.Command {
	c := &cobra.Command{
		Use:               "deny ID",
		Short:             "Deny a pending tool call",
		Long:              `Deny a pending tool call; the agent receives an error instead of a result.`,
		Example:           `  carapace confirm deny 7f3a9c`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeConfirmation,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			if err := c.Deny(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "denied %s\n", printable(args[0]))
			return nil
		},
	}
	if !approve {
		return c
	}
	c.Use = "approve ID"
	c.Short = "Approve a pending tool call"
	c.Long = `Approve a pending tool call. carapace first fetches the confirmation and
prints the tool and arguments being approved, then approves exactly those:
the approval carries the hash of the arguments shown, and the core refuses
it if they no longer match.`
	c.Example = `  carapace confirm approve 7f3a9c`
	c.RunE = func(cmd *cobra.Command, args []string) error {
		c, _, err := a.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
		defer cancel()
		list, err := c.Confirmations(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(list, func(p control.Confirmation) bool { return p.ID == args[0] })
		if i < 0 {
			return fmt.Errorf("no pending confirmation %q (it may have expired or been answered; see carapace confirm list): %w",
				printable(args[0]), control.ErrNotFound)
		}
		p := list[i]
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "Approving %s for group %s (session %s, expires in %s)\n", printable(p.Tool), orDash(p.Group),
			orDash(p.Session), age(time.Until(p.Expires)))
		fmt.Fprintf(out, "  arguments: %s\n", compactJSON(p.Arguments, 0))
		if err := c.Approve(ctx, p.ID, p.ArgsHash); err != nil {
			return err
		}
		fmt.Fprintf(out, "approved %s\n", printable(p.ID))
		return nil
	}
	return c
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
	list, err := c.Confirmations(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, 0, len(list))
	for _, p := range list {
		ids = append(ids, p.ID+"\t"+printable(p.Tool))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
