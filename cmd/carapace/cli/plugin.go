package cli

import "github.com/spf13/cobra"

// pluginCmd groups the plugin commands.
func (a *app) pluginCmd() *cobra.Command {
	return groupCmd(&cobra.Command{Use: "plugin", Short: "Create, check, build, install and manage plugins"})
}
