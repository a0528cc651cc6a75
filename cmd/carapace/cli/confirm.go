package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
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
answering before it expires counts as a denial.

What you approve is what runs. Where the core's sanitiser hid part of the
arguments (a secret-looking value the agent put in them), no surface
offers Approve on that copy: read them as they run with
"carapace confirm show --raw ID" and approve with
"carapace confirm approve --raw ID", or deny anywhere.

Where what a call does is not all in its arguments (a mail to send from
a draft), its plugin's preview of it — for a mail the From, every
address, the subject and the whole body — is shown whole above the
arguments, and the approval binds it too: if the content changes before
the call runs, the plugin refuses to run it. Surfaces that cannot show
a preview whole (a Telegram message, a notification) offer Deny only.`,
		Example: `  carapace confirm list
  carapace confirm show 7f3a9c
  carapace confirm approve 7f3a9c
  carapace confirm show --raw 7f3a9c && carapace confirm approve --raw 7f3a9c
  carapace confirm deny 7f3a9c`,
	})
	c.AddCommand(a.confirmListCmd(), a.confirmShowCmd(), a.confirmDecideCmd(true), a.confirmDecideCmd(false))
	return c
}

func (a *app) confirmListCmd() *cobra.Command {
	return query(a, &cobra.Command{
		Use:   "list",
		Short: "List the pending confirmations",
		Long: `List the pending confirmations: id, tool, group, session, age, time left
before it expires (and counts as denied), and the arguments cut to one
line (how many values the display hides, if any). The id is shown by its
first 8 characters: show, approve or deny takes any unique prefix of 6 or
more. carapace confirm show prints one in full; --json prints them all.`,
		Example: `  carapace confirm list
  carapace confirm list --json`,
		Args: cobra.NoArgs,
	}, "confirmations", func(q call) ([]api.Confirmation, error) {
		return q.client.Confirmations(q.ctx, false)
	}, func(q call, list []api.Confirmation) error { return printConfirmations(q.out, list) })
}

// printConfirmations writes the pending confirmations as a table.
func printConfirmations(out io.Writer, list []api.Confirmation) error {
	now := time.Now()
	return printTable(out, list, "no pending confirmations", "ID\tTOOL\tGROUP\tSESSION\tAGE\tLEFT\tARGUMENTS", func(p api.Confirmation) string {
		left := "expired"
		if p.ExpiresAt.After(now) {
			left = age(p.ExpiresAt.Sub(now))
		}
		args := compactJSON(p.Arguments, argsWidth)
		if len(p.Hidden) > 0 {
			args = fmt.Sprintf("(%d hidden: confirm show --raw) %s", len(p.Hidden), args)
		}
		if len(p.Why) > 0 {
			args = fmt.Sprintf("(why: %d %s, see confirm show) %s", len(p.Why), plural(len(p.Why), "reason"), args)
		}
		if p.Preview != "" || p.PreviewOmitted {
			args = "(preview: see confirm show) " + args
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", api.ShortID(p.ID), printable(p.Tool), orDash(p.Group),
			orDash(p.Session), age(now.Sub(p.CreatedAt)), left, args)
	})
}

// confirmShowCmd is `confirm show`.
func (a *app) confirmShowCmd() *cobra.Command {
	var raw bool
	c := query(a, &cobra.Command{
		Use:   "show ID",
		Short: "Show one confirmation in full",
		Long: `Show one confirmation in full: tool, group, session, times, digest, what
the call will do, and every argument, each value whole (characters that
could hide or reorder text are written as \u escapes).

Where the core's sanitiser hid part of the arguments, show lists each
hidden value (where, what it looked like, how many characters) and
prints the sanitised copy. --raw prints the arguments exactly as they run,
secrets included (the core audits that they were shown); approve them
with carapace confirm approve --raw ID. Only a pending confirmation's
arguments are kept as they run.`,
		Example: `  carapace confirm show 7f3a9c
  carapace confirm show --raw 7f3a9c
  carapace confirm show --json 7f3a9c`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeConfirmation,
	}, "confirmation", func(q call) (api.Confirmation, error) {
		return fetchConfirmation(q.ctx, q.client, q.args[0], raw)
	}, func(q call, p api.Confirmation) error {
		writeConfirmation(q.out, p)
		return nil
	})
	c.Flags().BoolVar(&raw, "raw", false, "print the arguments exactly as they run, secrets included")
	return c
}

// fetchConfirmation returns confirmation ref, with its arguments as they
// run when raw.
func fetchConfirmation(ctx context.Context, c *control.Client, ref string, raw bool) (api.Confirmation, error) {
	if raw {
		return c.ConfirmationRaw(ctx, ref)
	}
	return c.Confirmation(ctx, ref)
}

// writeConfirmation prints p for a person: what it is, then every
// argument whole, and what the display hides.
func writeConfirmation(out io.Writer, p api.Confirmation) {
	fmt.Fprintf(out, "confirmation %s\n", printable(p.ID))
	fmt.Fprintf(out, "  tool:     %s\n", printable(p.Tool))
	fmt.Fprintf(out, "  group:    %s\n", orDash(p.Group))
	fmt.Fprintf(out, "  session:  %s\n", orDash(p.Session))
	fmt.Fprintf(out, "  digest:   %s\n", printable(p.ArgsHash))
	if p.Pending() {
		fmt.Fprintf(out, "  expires:  in %s (then denied)\n", age(time.Until(p.ExpiresAt)))
	} else {
		fmt.Fprintf(out, "  decided:  %s\n", decidedHow(p))
	}
	for _, l := range strings.Split(p.Summary, "\n") {
		if l = printable(l); l != "" {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	writeWhy(out, p.Why)
	writePreview(out, p)
	switch {
	case p.Raw:
		fmt.Fprintln(out, "  arguments, exactly as they run:")
	case len(p.Hidden) > 0:
		fmt.Fprintln(out, "  arguments, with secrets hidden (not what runs):")
	default:
		fmt.Fprintln(out, "  arguments:")
	}
	fmt.Fprintln(out, indentJSON(p.Arguments, "    "))
	if len(p.Hidden) == 0 {
		return
	}
	if p.Raw {
		fmt.Fprintln(out, "  the other surfaces hide:")
	} else {
		fmt.Fprintln(out, "  hidden:")
	}
	for _, h := range p.Hidden {
		fmt.Fprintf(out, "    %s\n", hiddenLine(h))
	}
	if !p.Raw && p.Pending() {
		fmt.Fprintf(out, "  These cannot be approved as shown: read them with carapace confirm show --raw %s,\n  approve with carapace confirm approve --raw %s, or deny.\n", api.ShortID(p.ID), api.ShortID(p.ID))
	}
}

// hiddenLine says where a hidden value is, what it looked like and how
// much is hidden.
func hiddenLine(h api.Hidden) string {
	where := "the arguments"
	if h.Path != "" {
		where = printable(h.Path)
	}
	what := printable(h.Kind)
	if h.Chars > 0 {
		return fmt.Sprintf("%s: %d characters hidden (%s)", where, h.Chars, what)
	}
	return fmt.Sprintf("%s: hidden (%s)", where, what)
}

// errNotApproved ends an approve the person declined at the prompt: exit
// status 1, the message already printed.
var errNotApproved = exitCode(1)

// describeDecision prints what a decision on p decides: the tool, what
// it will do, and every argument — as they run, or the sanitised copy
// with what it hides (which approve then refuses).
func describeDecision(out io.Writer, p api.Confirmation, doing string) {
	fmt.Fprintf(out, "%s %s for group %s (session %s, expires in %s)\n", doing, printable(p.Tool), orDash(p.Group), orDash(p.Session), age(time.Until(p.ExpiresAt)))
	for _, l := range strings.Split(p.Summary, "\n") {
		if l = printable(l); l != "" {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	writeWhy(out, p.Why)
	writePreview(out, p)
	switch {
	case p.Raw:
		fmt.Fprintf(out, "  arguments, exactly as they run:\n%s\n", indentJSON(p.Arguments, "    "))
	case len(p.Hidden) > 0:
		fmt.Fprintf(out, "  arguments, with secrets hidden (not what runs): %s\n", compactJSON(p.Arguments, 0))
		for _, h := range p.Hidden {
			fmt.Fprintf(out, "    hidden: %s\n", hiddenLine(h))
		}
	case p.ArgumentsOmitted:
		fmt.Fprintln(out, "  arguments: not loaded")
	default:
		fmt.Fprintf(out, "  arguments: %s\n", compactJSON(p.Arguments, 0))
	}
	fmt.Fprintf(out, "  digest:    %s\n", printable(p.ArgsHash))
}

// confirmDecideCmd is `confirm approve` or `confirm deny`.
func (a *app) confirmDecideCmd(approve bool) *cobra.Command {
	verb, doing, done := "deny", "Denying", "denied"
	if approve {
		verb, doing, done = "approve", "Approving", "approved"
	}
	var raw, yes bool
	long := strings.ToUpper(verb[:1]) + verb[1:] + ` a pending tool call. ID is the confirmation's id or a unique prefix of
at least 6 characters of it (an ambiguous one is refused). carapace first
fetches the confirmation and prints the tool and every argument you are
deciding, then decides exactly those: the decision carries the hash of the
arguments shown, and the core refuses it if they no longer match.

The first decision wins, wherever it is made (here, the menu bar, a
notification, the phone): if another came first, carapace says which and
exits with status 1.`
	example := "  carapace confirm " + verb + " 7f3a9c"
	if approve {
		long += `

At a terminal, approve asks before it decides, once you have read what
runs (--yes does not ask). Where the core's sanitiser hid part of the
arguments, approve refuses the sanitised copy: --raw fetches and prints
the arguments exactly as they run, secrets included, and approves those.`
		example += "\n  carapace confirm approve --raw 7f3a9c"
	}
	c := &cobra.Command{
		Use:               verb + " ID",
		Short:             strings.ToUpper(verb[:1]) + verb[1:] + " a pending tool call",
		Long:              long,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeConfirmation,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			p, err := fetchConfirmation(ctx, c, args[0], raw)
			if err != nil {
				return err
			}
			if !p.Pending() {
				return fmt.Errorf("confirmation %s is already decided: %s: %w", printable(p.ID), decidedHow(p), api.ErrConflict)
			}
			out := cmd.OutOrStdout()
			describeDecision(out, p, doing)
			if approve && (p.PreviewOmitted || (p.Preview == "") != (p.PreviewDigest == "")) {
				return fmt.Errorf("%w: the preview of what the call does was not shown whole, so it cannot be approved: carapace confirm show %s (or deny it)",
					api.ErrConflict, api.ShortID(p.ID))
			}
			if approve && !p.Exact() {
				return fmt.Errorf("%w: part of the arguments is hidden, so what would run was not shown: read it with carapace confirm show --raw %s, then approve with carapace confirm approve --raw %s (or deny it)",
					api.ErrConflict, api.ShortID(p.ID), api.ShortID(p.ID))
			}
			if in, ok := cmd.InOrStdin().(*os.File); approve && !yes && ok && terminal(in) {
				// What was printed is what runs: ask once it is read. The
				// request's deadline starts after the answer.
				ok, err := newPrompter(in, out).yes("Approve this call?", false)
				if err != nil || !ok {
					fmt.Fprintf(out, "not approved: %s is still pending (carapace confirm deny %s denies it)\n", api.ShortID(p.ID), api.ShortID(p.ID))
					return errNotApproved
				}
				cancel()
				ctx, cancel = context.WithTimeout(cmd.Context(), requestTimeout)
				defer cancel()
			}
			got, err := c.Decide(ctx, api.Decision{ID: p.ID, Approve: approve, ArgsHash: p.ArgsHash, PreviewDigest: p.PreviewDigest,
				Surface: "cli", Decider: decider(), Raw: p.Raw})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s %s\n", done, printable(got.ID))
			return nil
		},
	}
	if approve {
		c.Flags().BoolVar(&raw, "raw", false, "fetch and print the arguments exactly as they run, secrets included, and approve those")
		c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask at a terminal before approving")
	}
	return c
}

// decidedHow says how a resolved confirmation ended, for people.
func decidedHow(p api.Confirmation) string {
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

// writePreview prints a confirmation's preview (a tool that declares one:
// what a mail to send says), whole, one line of it a line, each made
// printable (it is untrusted text), between two rules so that its end is
// plain; the digest it binds after it.
func writePreview(out io.Writer, p api.Confirmation) {
	switch {
	case p.PreviewOmitted:
		fmt.Fprintf(out, "  preview:  not loaded (see carapace confirm show %s)\n", api.ShortID(p.ID))
		return
	case p.Preview == "" && p.PreviewDigest != "" && !p.Pending():
		fmt.Fprintf(out, "  preview digest: %s (the text is kept only while it waits)\n", printable(p.PreviewDigest))
		return
	case p.Preview == "":
		return
	}
	head := "  what it will do (the plugin's preview, whole):"
	for _, h := range p.Hidden {
		if h.Path == api.PreviewPath && !p.Raw {
			head = "  what it will do (the plugin's preview, with secrets hidden: not what runs):"
		}
	}
	fmt.Fprintln(out, head)
	fmt.Fprintln(out, "    ----")
	for _, l := range strings.Split(strings.TrimSuffix(p.Preview, "\n"), "\n") {
		fmt.Fprintf(out, "    | %s\n", printable(l))
	}
	fmt.Fprintln(out, "    ----")
	fmt.Fprintf(out, "  preview digest: %s\n", printable(p.PreviewDigest))
}

// writeWhy prints why the core asks, when not only for the tool's risk
// (a URL not given, a tainted session): each reason whole, on its line.
func writeWhy(out io.Writer, why []string) {
	for _, w := range why {
		if w = printable(w); w != "" {
			fmt.Fprintf(out, "  why:      %s\n", w)
		}
	}
}
