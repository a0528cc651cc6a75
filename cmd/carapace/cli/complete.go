package cli

import (
	"context"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
)

// completionTimeout bounds a completion's request to the core: a shell
// waits on it.
const completionTimeout = 2 * time.Second

// completeFlags gives every command's flags that name something of this
// Carapace — a group, a session, a runtime, a log level — their
// completions, wherever they appear, unless the command gave its own.
func (a *app) completeFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		var fn cobra.CompletionFunc
		switch f.Name {
		case "group":
			fn = a.completeGroup
		case "session":
			fn = a.completeSession
		case "runtime":
			fn = cobra.FixedCompletions([]string{"container", "docker", "podman", "apple", "none"}, cobra.ShellCompDirectiveNoFileComp)
		case "log-level":
			fn = cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp)
		default:
			return
		}
		if _, ok := c.GetFlagCompletionFunc(f.Name); !ok {
			_ = c.RegisterFlagCompletionFunc(f.Name, fn)
		}
	})
	for _, sub := range c.Commands() {
		a.completeFlags(sub)
	}
}

// completeGroup completes a group: those config.toml names and those with
// a folder in the home (a group that has run sessions).
func (a *app) completeGroup(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	h, err := a.home()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return groups(h), cobra.ShellCompDirectiveNoFileComp
}

// groups lists the home's groups, sorted.
func groups(h home.Dir) []string {
	var out []string
	if cfg, err := config.Load(h.Config()); err == nil {
		for g := range cfg.Groups {
			out = append(out, g)
		}
	}
	entries, _ := os.ReadDir(h.Path("groups"))
	for _, e := range entries {
		if e.IsDir() && home.CheckGroup(e.Name()) == nil && !slices.Contains(out, e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// completeSession completes the running core's sessions.
func (a *app) completeSession(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, _, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	list, err := c.Sessions(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.ID+"\t"+printable(s.Group+", "+s.Runtime))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
