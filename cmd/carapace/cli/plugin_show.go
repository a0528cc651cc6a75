package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/manifest"
)

func (a *app) pluginShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a plugin's state and its confinement: the folders and hosts it may reach",
		Long: `Show one plugin as the running core sees it: its state, tools and handler
pid, and for an out-of-process plugin its confinement — whether the
operating system confines it and with what (Landlock and seccomp on Linux,
Seatbelt on macOS), the folders it may read and write, and the hosts it may
reach through its egress point in the core (none: no network at all).

A plugin declares hosts in its manifest ("network") and may name config
keys that hold them (the Telegram plugin's api_url); a folder beyond its own
is granted only when you set the config key its manifest names. Setting
[plugins.NAME] unconfined = true in config.toml lifts the confinement: the
plugin can then read all your files and reach any host.`,
		Example: `  carapace plugin show telegram
  carapace plugin show telegram --json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completePlugin,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := manifest.CheckPluginName(name); err != nil {
				return &usageError{err}
			}
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			st, err := c.Status(ctx)
			if errors.Is(err, control.ErrNotRunning) {
				return fmt.Errorf("%w: plugin show asks the running core, which computed the policy it imposes: start it with carapace serve", err)
			}
			if err != nil {
				return err
			}
			for _, p := range st.Plugins {
				if p.Name == name {
					if asJSON {
						return writeJSON(cmd.OutOrStdout(), p)
					}
					showPlugin(cmd.OutOrStdout(), p)
					return nil
				}
			}
			return fmt.Errorf("the core has no plugin %q: carapace plugin list shows the ones it has", name)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the plugin as JSON")
	return c
}

// showPlugin prints one plugin and its confinement.
func showPlugin(w io.Writer, p api.PluginStatus) {
	fmt.Fprintf(w, "plugin:      %s\n", printable(p.Name))
	fmt.Fprintf(w, "state:       %s\n", printable(state(p)))
	if !healthy(p) {
		fmt.Fprintf(w, "problem:     %s\n", describeFailure(p))
	}
	fmt.Fprintf(w, "source:      %s\n", orDash(p.Source))
	if p.Dir != "" {
		fmt.Fprintf(w, "folder:      %s\n", printable(p.Dir))
	}
	fmt.Fprintf(w, "version:     %s\n", orDash(p.Version))
	fmt.Fprintf(w, "tools:       %s\n", orDash(printable(strings.Join(p.Tools, ", "))))
	if p.PID > 0 {
		fmt.Fprintf(w, "pid:         %d\n", p.PID)
	}
	cf := p.Confinement
	if cf == nil {
		fmt.Fprintln(w, "confinement: none: it runs inside the core (a built-in plugin)")
		return
	}
	switch cf.Mode {
	case api.ConfinementUnconfined:
		fmt.Fprintln(w, "confinement: NONE: [plugins."+printable(p.Name)+"] unconfined = true in config.toml; it can read all your files, reach the core's sockets and any host")
	default:
		fmt.Fprintf(w, "confinement: %s by %s\n", printable(cf.Mode), orDash(printable(cf.Mechanism)))
	}
	list := func(title string, items []string, none string) {
		fmt.Fprintf(w, "%s\n", title)
		if len(items) == 0 {
			fmt.Fprintf(w, "  %s\n", none)
		}
		for _, it := range items {
			fmt.Fprintf(w, "  %s\n", printable(it))
		}
	}
	list("reads:", cf.Read, "nothing")
	list("writes:", cf.Write, "nothing")
	hosts := cf.Hosts
	if cf.Public {
		hosts = append([]string{"any public address (loopback, private, link-local and metadata addresses refused)"}, hosts...)
	}
	list("network:", hosts, "none: no TCP, no UDP, no DNS")
}
